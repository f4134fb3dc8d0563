"""Read the newest stretch of one stream's timeline, for decisions that look back a little."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, ScalarSelect, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import Segment, StreamKey
from pallas.store.identities import stream_where
from pallas.store.models import Message, Stream


@dataclass(frozen=True)
class TimelineLine:
    message_id: int
    sender_person_id: int
    from_bot: bool
    text: str
    segments: tuple[Segment, ...]
    is_poke: bool
    recalled: bool
    suppressed: bool
    time: datetime


_LINE_COLUMNS = (
    Message.id,
    Message.sender_person_id,
    Message.from_bot,
    Message.text,
    Message.segments,
    Message.is_poke,
    Message.recalled,
    Message.suppressed,
    Message.time,
)


@dataclass(frozen=True)
class SentPoke:
    """A poke the bot made, as the timeline recorded it."""

    target: str
    time: datetime


async def lines_up_to(
    engine: AsyncEngine, stream: StreamKey, platform_message_id: str, limit: int
) -> list[TimelineLine]:
    """The `limit` newest messages up to and including the given one, oldest first.

    Bounded by that message rather than by "now", so the answer for a message does not
    depend on what arrived while it was being handled.
    """
    stream_id = _stream_id(stream)
    anchor = (
        select(Message.id)
        .where(Message.stream_id == stream_id, Message.platform_message_id == platform_message_id)
        .scalar_subquery()
    )
    query = (
        select(*_LINE_COLUMNS)
        .where(Message.stream_id == stream_id, Message.id <= anchor)
        .order_by(Message.id.desc())
        .limit(limit)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [_line(row) for row in reversed(rows)]


async def bot_pokes_since(
    engine: AsyncEngine, stream: StreamKey, since: datetime, limit: int = 100
) -> list[SentPoke]:
    """The bot's own pokes in the stream from `since` on, newest first."""
    query = (
        select(Message.mentions, Message.time)
        .where(
            Message.stream_id == _stream_id(stream),
            Message.is_poke.is_(True),
            Message.from_bot.is_(True),
            Message.time >= since,
        )
        .order_by(Message.id.desc())
        .limit(limit)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    # A poke's target is its one mention (see translate.py and docs/architecture.md).
    return [SentPoke(str(row.mentions[0]), row.time) for row in rows if row.mentions]


def _stream_id(stream: StreamKey) -> ScalarSelect[Any]:
    return (
        select(Stream.id)
        .where(
            *stream_where(stream.platform, stream.self_id, stream.kind.value, stream.external_id)
        )
        .scalar_subquery()
    )


def _line(row: Row[Any]) -> TimelineLine:
    return TimelineLine(
        message_id=row.id,
        sender_person_id=row.sender_person_id,
        from_bot=row.from_bot,
        text=row.text,
        segments=tuple(Segment.from_json(seg) for seg in row.segments),
        is_poke=row.is_poke,
        recalled=row.recalled,
        suppressed=row.suppressed,
        time=row.time,
    )
