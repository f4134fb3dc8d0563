"""The bot's own sticker collection: which kept files it may send, with their captions and the
feelings they show, and how often each was sent (counted after the platform's receipt).

Stickers come from the groups (a sticker people keep sending) and from the owner; a library
file is never dropped by the assets' retention (docs/media.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.assets import ASSET_PREFIX
from pallas.product.media.tables import Sticker, StickerUse
from pallas.store.database import Database
from pallas.store.models import Asset
from pallas.store.sql import insert_ignoring_conflicts, upsert


@dataclass(frozen=True)
class LibrarySticker:
    sha256: str
    path: str  # relative to the assets folder
    caption: str
    emotions: tuple[str, ...]
    source: str
    uses: int
    last_sent_at: datetime | None

    @property
    def reference(self) -> str:
        return f"{ASSET_PREFIX}{self.path}"


@dataclass(frozen=True)
class Favourite:
    """A (group, person, sticker) count that crossed the habit threshold, not yet a fact."""

    stream_id: int
    person_id: int
    sha256: str
    count: int


class StickerLibrary:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()

    async def add(
        self,
        sha256: str,
        caption: str,
        emotions: Sequence[str],
        source: str,
        now: datetime,
        *,
        replace: bool = False,
    ) -> None:
        """Put a kept file in the collection; `replace` overwrites an earlier caption (the
        owner's word beats a label)."""
        values = {
            "sha256": sha256,
            "caption": caption[:80],
            "emotions": " ".join(emotions)[:200],
            "source": source,
            "added_at": now,
            "enabled": True,
            "uses": 0,
        }
        async with self._writes.begin() as conn:
            if replace:
                keep = {k: v for k, v in values.items() if k != "uses"}
                await conn.execute(upsert(conn, Sticker.__table__, ["sha256"], keep))
            else:
                insert = insert_ignoring_conflicts(conn, Sticker.__table__)
                await conn.execute(insert.values(values))

    async def enabled(self) -> list[LibrarySticker]:
        query = (
            select(
                Sticker.sha256,
                Asset.path,
                Sticker.caption,
                Sticker.emotions,
                Sticker.source,
                Sticker.uses,
                Sticker.last_sent_at,
            )
            .join(Asset, Asset.sha256 == Sticker.sha256)
            .where(Sticker.enabled.is_(True))
            .order_by(Sticker.added_at, Sticker.sha256)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [
            LibrarySticker(r[0], r[1], r[2], tuple(r[3].split()), r[4], r[5], r[6]) for r in rows
        ]

    async def rename(self, sha256: str, caption: str) -> bool:
        """The owner's caption for a sticker of the collection."""
        async with self._writes.begin() as conn:
            result = await conn.execute(
                update(Sticker).where(Sticker.sha256 == sha256).values(caption=caption[:80])
            )
        return bool(result.rowcount)

    async def set_enabled(self, sha256: str, enabled: bool) -> bool:
        async with self._writes.begin() as conn:
            result = await conn.execute(
                update(Sticker).where(Sticker.sha256 == sha256).values(enabled=enabled)
            )
        return bool(result.rowcount)

    async def count_sent(self, sha256: str, now: datetime) -> None:
        """One more use, once the platform confirmed the send."""
        async with self._writes.begin() as conn:
            await conn.execute(
                update(Sticker)
                .where(Sticker.sha256 == sha256)
                .values(uses=Sticker.uses + 1, last_sent_at=now)
            )

    async def popular_outside(self, threshold: int, limit: int) -> list[str]:
        """Stickers sent at least `threshold` times in some group, not yet in the collection."""
        total = func.sum(StickerUse.count)
        query = (
            select(StickerUse.sha256)
            .where(StickerUse.sha256.not_in(select(Sticker.sha256)))
            .where(StickerUse.sha256.in_(select(Asset.sha256)))
            .group_by(StickerUse.stream_id, StickerUse.sha256)
            .having(total >= threshold)
            .order_by(total.desc())
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            return list(dict.fromkeys(await conn.scalars(query)))

    async def due_favourites(self, threshold: int, limit: int) -> list[Favourite]:
        """Counts past the habit threshold that are not a person fact yet, biggest first."""
        query = (
            select(StickerUse.stream_id, StickerUse.person_id, StickerUse.sha256, StickerUse.count)
            .where(StickerUse.count >= threshold, StickerUse.promoted_at.is_(None))
            .where(StickerUse.sha256.in_(select(Asset.sha256)))
            .order_by(StickerUse.count.desc())
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            return [Favourite(*row) for row in await conn.execute(query)]

    async def mark_promoted(self, favourite: Favourite, now: datetime) -> None:
        async with self._writes.begin() as conn:
            await conn.execute(
                update(StickerUse)
                .where(
                    StickerUse.stream_id == favourite.stream_id,
                    StickerUse.person_id == favourite.person_id,
                    StickerUse.sha256 == favourite.sha256,
                )
                .values(promoted_at=now)
            )
