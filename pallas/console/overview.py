"""The overview: what the bot did in the last day, by the hour, and what it cost (pure
bucketing of rows the store gives)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store import console_reads
from pallas.store.llm_usage import cost_report

HOURS = 24


class HourCount(BaseModel):
    start: datetime
    heard: int  # messages from people
    said: int  # the bot's own messages


class Overview(BaseModel):
    bots: list[str]
    database: str
    heard_today: int
    said_today: int
    model_calls_today: int
    cost_today: float
    hours: list[HourCount]


def by_hour(rows: Sequence[tuple[datetime, bool]], now: datetime) -> list[HourCount]:
    """The last HOURS hours, oldest first, each with its counts (pure)."""
    top = now.replace(minute=0, second=0, microsecond=0)
    starts = [top - timedelta(hours=h) for h in range(HOURS - 1, -1, -1)]
    heard, said = [0] * HOURS, [0] * HOURS
    for time, from_bot in rows:
        index = HOURS - 1 - int((top - time.replace(minute=0, second=0, microsecond=0))
                                .total_seconds() // 3600)  # fmt: skip
        if 0 <= index < HOURS:
            (said if from_bot else heard)[index] += 1
    counted = zip(starts, heard, said, strict=True)
    return [HourCount(start=start, heard=h, said=b) for start, h, b in counted]


async def overview(
    engine: AsyncEngine, bots: Iterable[str], database: str, now: datetime
) -> Overview:
    since = now - timedelta(hours=HOURS)
    rows = await console_reads.message_times(engine, since, now + timedelta(seconds=1))
    hours = by_hour(rows, now)
    report = await cost_report(engine, since, now + timedelta(seconds=1))
    return Overview(
        bots=sorted(bots),
        database=database,
        heard_today=sum(h.heard for h in hours),
        said_today=sum(h.said for h in hours),
        model_calls_today=sum(line.calls for line in report.by_purpose),
        cost_today=round(report.total_cost, 6),
        hours=hours,
    )
