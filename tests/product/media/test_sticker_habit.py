"""The periodic sticker-habit run: it reads in steps until caught up, leaving the newest
messages (whose pictures may still be being kept) for the next run."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import MediaRef, Segment, SegmentKind
from pallas.product.media import sticker_habit
from pallas.product.media.sticker_habit import HABIT_KIND, SETTLE, scan_sticker_habit
from pallas.store.jobs import ClaimedJob
from pallas.store.sticker_habit import StickerHabitStore
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import group, message

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SHA = "c" * 64


async def test_a_run_reads_in_steps_until_caught_up(
    engine: AsyncEngine, writer: TimelineWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sticker_habit, "STEP", 2)
    segment = Segment(
        SegmentKind.IMAGE, text="[动画表情]", media=MediaRef(asset=f"asset:cc/{SHA}.gif")
    )
    written = []
    for minute in (0, 1, 2, 3, 4, 30):
        inbound = message("x", stream=group("h"), time=T0 + timedelta(minutes=minute))
        result = await writer.write(replace(inbound, segments=(segment,)))
        assert isinstance(result, MessageWritten)
        written.append(result)
    store = StickerHabitStore(engine)
    now = T0 + timedelta(minutes=30) + SETTLE / 2  # the last message is too young yet
    job = ClaimedJob(1, HABIT_KIND, {}, None, 1, 3, now)
    await scan_sticker_habit(job, store, lambda: now)
    [favourite] = await store.favourites(written[0].stream_id, written[0].person_id)
    assert favourite.count == 5
    later = now + SETTLE
    await scan_sticker_habit(job, store, lambda: later)
    [favourite] = await store.favourites(written[0].stream_id, written[0].person_id)
    assert favourite.count == 6
