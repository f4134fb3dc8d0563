"""The sticker-habit scan on SQLite and PostgreSQL: counts per group, person and sticker, from
kept stickers only, resumed by its (time, id) cursor, never counting a message twice."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import MediaRef, Segment, SegmentKind
from pallas.product.media.habit_store import StickerHabitStore, sticker_hashes
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import group, message

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SHA_A, SHA_B = "a" * 64, "b" * 64


def sticker(sha: str | None, label: str = "[动画表情]") -> Segment:
    asset = f"asset:{sha[:2]}/{sha}.gif" if sha else ""
    return Segment(SegmentKind.IMAGE, text=label, media=MediaRef(url="http://x", asset=asset))


async def send(
    writer: TimelineWriter, *segments: Segment, user: str = "42", room: str = "g", at: int = 0
) -> MessageWritten:
    inbound = replace(
        message("x", stream=group(room), user_id=user, time=T0 + timedelta(minutes=at)),
        segments=segments,
    )
    written = await writer.write(inbound)
    assert isinstance(written, MessageWritten)
    return written


def test_only_kept_stickers_have_a_hash() -> None:
    segments = [
        sticker(SHA_A).to_json(),
        sticker(SHA_B, label="[图片]").to_json(),  # an ordinary picture
        sticker(None).to_json(),  # a sticker whose file was not kept
        {"kind": "text", "text": "哈哈"},
    ]
    assert sticker_hashes(segments) == [SHA_A]


@pytest.fixture
def habit(engine: AsyncEngine) -> StickerHabitStore:
    return StickerHabitStore(engine)


async def test_counts_per_group_person_and_sticker_resumed_by_the_cursor(
    habit: StickerHabitStore, writer: TimelineWriter
) -> None:
    ming = await send(writer, sticker(SHA_A), sticker(SHA_A), at=0)
    await send(writer, sticker(SHA_B), at=1)
    await send(writer, sticker(SHA_A), user="43", at=2)
    await send(writer, sticker(SHA_A), room="other", at=3)
    step = await habit.scan_step("habit", T0 + timedelta(minutes=10), limit=2)
    assert (step.messages, step.done) == (2, False)
    step = await habit.scan_step("habit", T0 + timedelta(minutes=10), limit=2)
    assert (step.messages, step.done) == (2, False)
    step = await habit.scan_step("habit", T0 + timedelta(minutes=10), limit=2)
    assert (step.messages, step.done) == (0, True)
    favourites = await habit.favourites(ming.stream_id, ming.person_id)
    assert [(f.sha256, f.count) for f in favourites] == [(SHA_A, 2), (SHA_B, 1)]
    assert favourites[0].first_seen_at == T0 and favourites[0].last_seen_at == T0
    # Sent again later: the next scan adds only what is new.
    await send(writer, sticker(SHA_B), at=20)
    await send(writer, sticker(SHA_B), at=40)  # younger than the scan's limit: waits
    step = await habit.scan_step("habit", T0 + timedelta(minutes=30), limit=100)
    assert (step.messages, step.stickers) == (1, 1)
    favourites = await habit.favourites(ming.stream_id, ming.person_id)
    # A tie goes to the one sent last.
    assert [(f.sha256, f.count) for f in favourites] == [(SHA_B, 2), (SHA_A, 2)]


async def test_five_hundred_identical_stickers_in_a_minute_are_one_row(
    habit: StickerHabitStore, writer: TimelineWriter
) -> None:
    sent = [await send(writer, sticker(SHA_A)) for _ in range(500)]
    step = await habit.scan_step("habit", T0 + timedelta(minutes=5), limit=1000)
    assert (step.messages, step.stickers, step.done) == (500, 500, True)
    [favourite] = await habit.favourites(sent[0].stream_id, sent[0].person_id)
    assert favourite.count == 500
