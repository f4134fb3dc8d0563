"""The sticker habit's counts: which sticker each person sends in each group, and how often.

A scan reads the timeline after its cursor, in (time, message id) order, up to a moment a little
in the past (so the pictures of the newest messages have had time to be kept), counts every
sticker segment that became an asset, adds the counts and moves the cursor in one transaction.
Counts are a lower bound: a sticker whose file was not kept (a failed fetch, a file dropped by
retention before the scan) is not counted; market stickers (mface) are left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, Text, cast, literal, select, tuple_
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.core.assets import asset_path
from pallas.core.media import is_sticker_text
from pallas.product.media.tables import StickerUse
from pallas.store.database import Database
from pallas.store.models import Message, ScanCursor, UtcDateTime
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
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()

    async def scan_step(self, name: str, until: datetime, limit: int) -> ScanStep:
        """Read up to `limit` messages after the cursor and older than `until`; count them."""
        async with self._writes.begin() as conn:
            after = await _cursor(conn, name)
            ids = await _ids_after(conn, after, until, limit)
            if not ids:
                return ScanStep(0, 0, True)
            end = (await _time_of(conn, ids[-1]), ids[-1])
            rows = await _pictures_between(conn, after, end)
            counts: Counter[Key] = Counter()
            first: dict[Key, datetime] = {}
            last: dict[Key, datetime] = {}
            for row in rows:
                for sha in sticker_hashes(row.segments or ()):
                    key = (row.stream_id, row.sender_person_id, sha)
                    counts[key] += 1
                    first.setdefault(key, row.time)
                    last[key] = row.time
            await _add_counts(conn, counts, first, last)
            await _move_cursor(conn, name, end[0], end[1], until)
        return ScanStep(len(ids), sum(counts.values()), len(ids) < limit)

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


def _after(cursor: tuple[datetime, int]) -> ColumnElement[bool]:
    # A row comparison is one range search of ix_message_time_id; the same condition spelled
    # with OR made SQLite read and sort every row after the cursor, each step.
    return tuple_(Message.time, Message.id) > tuple_(
        literal(cursor[0], UtcDateTime()), literal(cursor[1])
    )


async def _ids_after(
    conn: AsyncConnection, cursor: tuple[datetime, int], until: datetime, limit: int
) -> list[int]:
    """The next `limit` messages' ids, in (time, id) order: read from the index alone."""
    query = (
        select(Message.id)
        .where(_after(cursor), Message.time < until)
        .order_by(Message.time, Message.id)
        .limit(limit)
    )
    return list(await conn.scalars(query))


async def _time_of(conn: AsyncConnection, message_id: int) -> datetime:
    return (await conn.execute(select(Message.time).where(Message.id == message_id))).scalar_one()


async def _pictures_between(
    conn: AsyncConnection, cursor: tuple[datetime, int], end: tuple[datetime, int]
) -> Sequence[Any]:
    """Messages of people in (cursor, end] that hold a picture: only those are decoded (the
    stored JSON names the segment kind in ASCII, so a text match finds them)."""
    up_to_end = tuple_(Message.time, Message.id) <= tuple_(
        literal(end[0], UtcDateTime()), literal(end[1])
    )
    query = (
        select(
            Message.id, Message.time, Message.stream_id, Message.sender_person_id, Message.segments
        )
        .where(_after(cursor), up_to_end, Message.from_bot.is_(False))
        .where(cast(Message.segments, Text).like('%"image"%'))
        .order_by(Message.time, Message.id)
    )
    return (await conn.execute(query)).all()


async def _add_counts(
    conn: AsyncConnection,
    counts: Counter[Key],
    first: dict[Key, datetime],
    last: dict[Key, datetime],
) -> None:
    """Add this step's counts in one statement: an existing row keeps its first sighting."""
    if not counts:
        return
    rows = [
        {
            "stream_id": stream_id,
            "person_id": person_id,
            "sha256": sha,
            "count": count,
            "first_seen_at": first[(stream_id, person_id, sha)],
            "last_seen_at": last[(stream_id, person_id, sha)],
        }
        for (stream_id, person_id, sha), count in counts.items()
    ]
    insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    table = StickerUse.__table__
    statement = insert(table)
    statement = statement.on_conflict_do_update(
        index_elements=["stream_id", "person_id", "sha256"],
        set_={
            "count": table.c.count + statement.excluded.count,
            "last_seen_at": statement.excluded.last_seen_at,
        },
    )
    await conn.execute(statement, rows)


async def _move_cursor(
    conn: AsyncConnection, name: str, time: datetime, message_id: int, now: datetime
) -> None:
    values = {"name": name, "after_time": time, "after_message_id": message_id, "updated_at": now}
    await conn.execute(upsert(conn, ScanCursor.__table__, ["name"], values))
