"""Model-call accounting: one row per attempt, and the cost report over a time range.

Rows are written through a group commit and never on the caller's latency path: a model call
waits for the model, not for the database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from loguru import logger
from sqlalchemy import Select, case, func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.group_commit import GroupCommitter, WriterClosedError
from pallas.store.models import LlmCall, Stream

MAX_ERROR_CHARS = 500


@dataclass(frozen=True)
class LlmCallRow:
    created_at: datetime
    purpose: str
    model_type: str
    model: str
    upstream_model: str
    provider: str
    outcome: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    usage_estimated: bool = False
    cost: float = 0.0
    latency_ms: float = 0.0
    stream_id: int | None = None
    turn_id: int | None = None
    error: str = ""
    attempt: int = 1


class LlmUsageWriter:
    def __init__(self, engine: AsyncEngine, *, write_lock: asyncio.Lock | None = None) -> None:
        self._engine = engine
        self._committer: GroupCommitter[LlmCallRow, None] = GroupCommitter(
            "llm usage writer", self._apply, write_lock=write_lock
        )
        self._pending: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._committer.start()

    async def close(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        await self._committer.close()

    def record(self, row: LlmCallRow) -> None:
        """Queue the row; a failed commit is logged, never raised into the model call."""
        task = asyncio.create_task(self._submit(row))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def flush(self) -> None:
        """Wait until every row recorded so far is committed (tests and shutdown)."""
        if self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def _submit(self, row: LlmCallRow) -> None:
        try:
            await self._committer.submit(row)
        except WriterClosedError:
            logger.warning("llm usage row dropped, writer closed: {} {}", row.model, row.purpose)
        except Exception as exc:  # already logged by the committer; keep the caller safe
            logger.error("llm usage row lost: {!r}", exc)

    async def _apply(self, rows: Sequence[LlmCallRow]) -> list[None]:
        async with self._engine.begin() as conn:
            await conn.execute(insert(LlmCall), [_values(row) for row in rows])
        return [None] * len(rows)


def _values(row: LlmCallRow) -> dict[str, object]:
    values = dict(row.__dict__)
    values["error"] = row.error[:MAX_ERROR_CHARS]
    return values


@dataclass(frozen=True)
class CostLine:
    key: str
    calls: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost: float


@dataclass(frozen=True)
class CostReport:
    since: datetime
    until: datetime
    by_purpose: tuple[CostLine, ...]
    by_model: tuple[CostLine, ...]
    by_group: tuple[CostLine, ...]  # key "group:<id>", "private:<id>" or "none"

    @property
    def total_cost(self) -> float:
        return sum(line.cost for line in self.by_purpose)


async def cost_report(engine: AsyncEngine, since: datetime, until: datetime) -> CostReport:
    """Cost per purpose, per answering model and per conversation for [since, until)."""
    async with engine.connect() as conn:
        purpose = await conn.execute(_grouped(LlmCall.purpose, since, until))
        model = await conn.execute(_grouped(LlmCall.model, since, until))
        stream_label = func.coalesce(Stream.kind + ":" + Stream.external_id, "none")
        group = await conn.execute(
            _grouped(stream_label, since, until).outerjoin(Stream, Stream.id == LlmCall.stream_id)
        )
        return CostReport(
            since,
            until,
            _lines(purpose.all()),
            _lines(model.all()),
            _lines(group.all()),
        )


def _grouped(key: object, since: datetime, until: datetime) -> Select[tuple[object, ...]]:
    return (
        select(
            key,  # type: ignore[call-overload]
            func.count(),
            func.sum(case((LlmCall.outcome != "ok", 1), else_=0)),
            func.sum(LlmCall.prompt_tokens),
            func.sum(LlmCall.completion_tokens),
            func.sum(LlmCall.cached_tokens),
            func.sum(LlmCall.cost),
        )
        .select_from(LlmCall)
        .where(LlmCall.created_at >= since, LlmCall.created_at < until)
        .group_by(key)  # type: ignore[arg-type]
    )


def _lines(rows: Sequence[object]) -> tuple[CostLine, ...]:
    lines = [
        CostLine(str(k), int(n), int(f or 0), int(p or 0), int(c or 0), int(h or 0), float(x or 0))
        for k, n, f, p, c, h, x in rows  # type: ignore[misc]
    ]
    return tuple(sorted(lines, key=lambda line: (-line.cost, line.key)))
