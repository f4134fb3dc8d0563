"""A stored message's media: which files it names, and the asset each one became.

The timeline row is the record: once a picture is kept, its segment gains `media.asset`, so a
later reader (a turn, the sticker habit) finds the file without fetching anything again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.models import Message


async def message_segments(engine: AsyncEngine, message_id: int) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        value = await conn.scalar(select(Message.segments).where(Message.id == message_id))
    return list(value or [])


async def set_segment_assets(
    engine: AsyncEngine,
    message_id: int,
    assets: Mapping[int, str],
    *,
    write_lock: asyncio.Lock,
) -> None:
    """Record `asset:` references on the message's segments, by segment index."""
    if not assets:
        return
    async with write_lock, engine.begin() as conn:
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
