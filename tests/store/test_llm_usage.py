"""The usage writer on a real database: batched rows are all committed by flush and close, and
one row the database refuses does not lose the rows committed with it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from loguru import logger
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.llm_usage import LlmCallRow, LlmUsageWriter
from pallas.store.models import LlmCall

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
NO_SUCH_STREAM = 999_999  # breaks the foreign key to stream.id


def row(number: int, *, stream_id: int | None = None) -> LlmCallRow:
    return LlmCallRow(
        created_at=T0 + timedelta(seconds=number),
        purpose="reply",
        model_type="chat",
        model="m",
        upstream_model="up-m",
        provider="p",
        outcome="ok",
        prompt_tokens=number,
        cost=number / 1e6,
        stream_id=stream_id,
        attempt=1,
    )


async def committed(engine: AsyncEngine) -> list[int]:
    async with engine.connect() as conn:
        result = await conn.execute(select(LlmCall.prompt_tokens).order_by(LlmCall.id))
        return list(result.scalars())


async def test_flush_commits_every_row_recorded_so_far(engine: AsyncEngine) -> None:
    writer = LlmUsageWriter(engine, linger_s=3600)  # only flush may commit them
    writer.start()
    for number in range(1, 121):
        writer.record(row(number))
    assert await committed(engine) == []

    await writer.flush()

    assert await committed(engine) == list(range(1, 121))
    await writer.close()


async def test_close_commits_what_is_left_and_later_rows_are_dropped(
    engine: AsyncEngine,
) -> None:
    writer = LlmUsageWriter(engine, linger_s=3600)
    writer.start()
    writer.record(row(1))
    writer.record(row(2))
    await writer.close()
    writer.record(row(3))
    await writer.flush()

    assert await committed(engine) == [1, 2]


async def test_a_refused_row_does_not_lose_its_neighbours(engine: AsyncEngine) -> None:
    errors: list[str] = []
    sink = logger.add(lambda m: errors.append(m.record["message"]), level="ERROR")
    writer = LlmUsageWriter(engine, linger_s=3600)
    writer.start()
    try:
        for number in range(1, 6):
            writer.record(row(number, stream_id=NO_SUCH_STREAM if number == 3 else None))
        await writer.flush()
    finally:
        logger.remove(sink)
    await writer.close()

    assert await committed(engine) == [1, 2, 4, 5]
    assert len(errors) == 1 and "1 llm usage row lost" in errors[0]
