"""The sticker habit's counts: which sticker each person sends in each group, and how often.

A scan reads the timeline after its cursor, in (time, message id) order, up to a moment a little
in the past (so the pictures of the newest messages have had time to be kept), counts every
sticker segment that became an asset, adds the counts and moves the cursor in one transaction.
Counts are a lower bound: a sticker whose file was not kept (a failed fetch, a file dropped by
retention before the scan) is not counted; market stickers (mface) are left out.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.core.assets import asset_path
from pallas.core.media import is_sticker_text
from pallas.store.models import Message, ScanCursor, StickerUse
from pallas.store.sql import upsert

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Key = tuple[int, int, str]  # (stream_id, person_id, sha256)


@dataclass(frozen=True)
class StickerCount:
    sha256: str
    count: int
    first_seen_at: datetime
    last_seen_at: datetime


@dataclass(frozen=True)
class ScanStep:
    messages: int  # read this step
    stickers: int  # counted this step
    done: bool  # nothing more to read before the limit


def sticker_hashes(segments: Iterable[dict[str, Any]]) -> list[str]:
    """The content hashes of a message's kept stickers (pure)."""
    hashes = []
    for segment in segments:
        # A described sticker reads "[动画表情：…]": the mark is the placeholder's start.
        if segment.get("kind") != "image" or not is_sticker_text(str(segment.get("text", ""))):
            continue
        relative = asset_path(str((segment.get("media") or {}).get("asset", "")))
        if relative:
            hashes.append(relative.rsplit("/", 1)[-1].split(".", 1)[0])
    return hashes


class StickerHabitStore:
    def __init__(self, engine: AsyncEngine, *, write_lock: asyncio.Lock | None = None) -> None:
        self._engine = engine
        self._lock = write_lock or asyncio.Lock()

    async def scan_step(self, name: str, until: datetime, limit: int) -> ScanStep:
        """Read up to `limit` messages after the cursor and older than `until`; count them."""
        async with self._lock, self._engine.begin() as conn:
            after_time, after_id = await _cursor(conn, name)
            rows = await _messages_after(conn, after_time, after_id, until, limit)
            counts: Counter[Key] = Counter()
            seen: dict[Key, datetime] = {}
            for row in rows:
                for sha in sticker_hashes(row.segments or ()):
                    key = (row.stream_id, row.sender_person_id, sha)
                    counts[key] += 1
                    seen[key] = row.time
            await _add_counts(conn, counts, seen)
            if rows:
                last = rows[-1]
                await _move_cursor(conn, name, last.time, last.id, until)
        return ScanStep(len(rows), sum(counts.values()), len(rows) < limit)

    async def favourites(
        self, stream_id: int, person_id: int, limit: int = 5
    ) -> list[StickerCount]:
        """A person's most sent stickers in a group, most first."""
        query = (
            select(
                StickerUse.sha256,
                StickerUse.count,
                StickerUse.first_seen_at,
                StickerUse.last_seen_at,
            )
            .where(StickerUse.stream_id == stream_id, StickerUse.person_id == person_id)
            .order_by(StickerUse.count.desc(), StickerUse.last_seen_at.desc())
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            return [StickerCount(*row) for row in await conn.execute(query)]


async def _cursor(conn: AsyncConnection, name: str) -> tuple[datetime, int]:
    row = (
        await conn.execute(
            select(ScanCursor.after_time, ScanCursor.after_message_id).where(
                ScanCursor.name == name
            )
        )
    ).first()
    return (row.after_time, int(row.after_message_id)) if row else (EPOCH, 0)


async def _messages_after(
    conn: AsyncConnection, after_time: datetime, after_id: int, until: datetime, limit: int
) -> Sequence[Any]:
    query = (
        select(
            Message.id, Message.time, Message.stream_id, Message.sender_person_id, Message.segments
        )
        .where(
            or_(Message.time > after_time, and_(Message.time == after_time, Message.id > after_id)),
            Message.time < until,
            Message.from_bot.is_(False),
        )
        .order_by(Message.time, Message.id)
        .limit(limit)
    )
    return (await conn.execute(query)).all()


async def _add_counts(
    conn: AsyncConnection, counts: Counter[Key], seen: dict[Key, datetime]
) -> None:
    for (stream_id, person_id, sha), count in counts.items():
        old = (
            await conn.execute(
                select(StickerUse.count, StickerUse.first_seen_at).where(
                    StickerUse.stream_id == stream_id,
                    StickerUse.person_id == person_id,
                    StickerUse.sha256 == sha,
                )
            )
        ).first()
        values = {
            "stream_id": stream_id,
            "person_id": person_id,
            "sha256": sha,
            "count": count + (old.count if old else 0),
            "first_seen_at": old.first_seen_at if old else seen[(stream_id, person_id, sha)],
            "last_seen_at": seen[(stream_id, person_id, sha)],
        }
        await conn.execute(
            upsert(conn, StickerUse.__table__, ["stream_id", "person_id", "sha256"], values)
        )


async def _move_cursor(
    conn: AsyncConnection, name: str, time: datetime, message_id: int, now: datetime
) -> None:
    values = {"name": name, "after_time": time, "after_message_id": message_id, "updated_at": now}
    await conn.execute(upsert(conn, ScanCursor.__table__, ["name"], values))
