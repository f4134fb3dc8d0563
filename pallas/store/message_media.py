"""A stored message's media: which files it names, and the asset each one became.

The timeline row is the record: once a picture is kept, its segment gains `media.asset`, so a
later reader (a turn, the sticker habit) finds the file without fetching anything again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.media import UNDESCRIBED
from pallas.store.database import Writes
from pallas.store.models import Message


async def message_segments(engine: AsyncEngine, message_id: int) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        value = await conn.scalar(select(Message.segments).where(Message.id == message_id))
    return list(value or [])


async def set_segment_assets(
    writes: Writes,
    message_id: int,
    assets: Mapping[int, str],
) -> None:
    """Record `asset:` references on the message's segments, by segment index."""
    if not assets:
        return
    async with writes.begin() as conn:
        value = await conn.scalar(select(Message.segments).where(Message.id == message_id))
        segments = [dict(segment) for segment in value or []]
        for index, reference in assets.items():
            if 0 <= index < len(segments):
                media = dict(segments[index].get("media") or {})
                media["asset"] = reference
                segments[index]["media"] = media
        await conn.execute(
            update(Message).where(Message.id == message_id).values(segments=segments)
        )


async def rewrite_segment_texts(
    writes: Writes,
    message_id: int,
    texts: Mapping[int, str],
) -> str | None:
    """Replace the texts of some of a message's segments (a picture's placeholder by what it
    shows) and the message's text with them; the new text, or None if the message is gone."""
    if not texts:
        return None
    async with writes.begin() as conn:
        value = await conn.scalar(select(Message.segments).where(Message.id == message_id))
        if value is None:
            return None
        segments = [dict(segment) for segment in value]
        for index, text in texts.items():
            if 0 <= index < len(segments):
                segments[index]["text"] = text
        text = "".join(str(s.get("text", "")) for s in segments if s.get("kind") != "reply")
        await conn.execute(
            update(Message).where(Message.id == message_id).values(segments=segments, text=text)
        )
    return text


async def undescribed_pictures_before(
    engine: AsyncEngine,
    stream_id: int,
    before_id: int,
    quoted: Sequence[str],
    look_back: int,
) -> list[int]:
    """The message a question points at: the quoted ones with a picture not yet described,
    else the newest such message among the `look_back` lines before `before_id`."""
    query = select(Message.id, Message.platform_message_id, Message.segments).where(
        Message.stream_id == stream_id
    )
    if quoted:
        query = query.where(Message.platform_message_id.in_(list(quoted)))
    else:
        query = query.where(Message.id < before_id).order_by(Message.id.desc()).limit(look_back)
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    found = [row.id for row in rows if _has_undescribed_picture(row.segments or ())]
    return found if quoted else found[:1]


def _has_undescribed_picture(segments: Sequence[dict[str, Any]]) -> bool:
    return any(s.get("kind") == "image" and s.get("text") in UNDESCRIBED for s in segments)


async def quoted_message_id(engine: AsyncEngine, stream_id: int, platform_id: str) -> int | None:
    query = select(Message.id).where(
        Message.stream_id == stream_id, Message.platform_message_id == platform_id
    )
    async with engine.connect() as conn:
        return await conn.scalar(query)
