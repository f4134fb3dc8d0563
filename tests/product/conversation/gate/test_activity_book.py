"""The activity book on a real store: a cold stream is loaded once, however many ask at once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.gate.activity_book import ActivityBook
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.engine_events import EngineEvents
from tests.support.inbound import BOT_ID, group, message


async def test_a_burst_into_a_cold_stream_shares_one_load_and_one_view(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    now = datetime.now(UTC)
    written = await writer.write(message("早", stream=group("cold"), time=now))
    assert isinstance(written, MessageWritten)
    book = ActivityBook(engine)
    statements = EngineEvents(engine, "before_cursor_execute")
    try:
        views = await asyncio.gather(*(book.get(written.stream_id, BOT_ID, now) for _ in range(20)))
    finally:
        statements.close()
    assert all(view is views[0] for view in views)
    assert [s.message_id for s in views[0].sightings] == [written.message_id]
    assert statements.count == 3  # the recent rows, the ambient passes, the follow-up flag
    assert await book.get(written.stream_id, BOT_ID, now) is views[0]


async def test_a_failed_load_fails_its_waiters_and_the_next_ask_loads_again(
    engine: AsyncEngine, writer: TimelineWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = datetime.now(UTC)
    written = await writer.write(message("在吗", stream=group("flaky"), time=now))
    assert isinstance(written, MessageWritten)
    book = ActivityBook(engine)
    real_load = book._load

    async def broken(*_args: Any) -> Any:
        await asyncio.sleep(0.01)
        raise ConnectionError("store away")

    monkeypatch.setattr(book, "_load", broken)
    results = await asyncio.gather(
        *(book.get(written.stream_id, BOT_ID, now) for _ in range(5)), return_exceptions=True
    )
    assert all(isinstance(r, ConnectionError) for r in results)
    monkeypatch.setattr(book, "_load", real_load)
    view = await book.get(written.stream_id, BOT_ID, now)
    assert [s.message_id for s in view.sightings] == [written.message_id]
