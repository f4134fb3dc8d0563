"""The asset store: media files kept once by content hash under PALLAS_DATA_DIR/assets.

  bytes -> checked by content (pallas/core/media.py; anything else is refused)
  -> sha256 -> already known: its row is touched; new: the file is written (to a temporary
  name, then renamed: a crash never leaves half a file under a real name), then its row
  -> `asset:<path>` for messages and outbox rows (docs/delivery.md)

Retention keeps the folder under a size cap, dropping the least recently used first: their
rows go in one transaction, then their files. A message that named a dropped asset keeps its
reference and its text; only the picture is gone (docs/media.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from loguru import logger
from sqlalchemy import Select, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.assets import ASSET_PREFIX, asset_file
from pallas.core.media import MediaInfo, sniff_media
from pallas.store.database import Database
from pallas.store.message_media import rewrite_segment_texts, set_segment_assets
from pallas.store.models import Asset
from pallas.store.sql import insert_ignoring_conflicts


@dataclass(frozen=True)
class StoredAsset:
    sha256: str
    path: str  # relative to the assets folder
    mime: str
    size: int
    width: int
    height: int

    @property
    def reference(self) -> str:
        return f"{ASSET_PREFIX}{self.path}"


@dataclass(frozen=True)
class AssetLabel:
    """What the vision model said a file shows: a short description (for a sticker, its
    caption) and, for a sticker, the feelings it expresses."""

    description: str
    emotions: tuple[str, ...] = ()


class AssetStore:
    def __init__(
        self, engine: AsyncEngine, folder: Path
    ) -> None:
        self.engine = engine
        self.folder = folder
        self._writes = Database.of(engine).writes()

    async def put(self, data: bytes, now: datetime, *, source: str = "platform") -> StoredAsset:
        """Keep `data` (once); raises `NotMedia` for anything not a usable image or sound."""
        info = await asyncio.to_thread(sniff_media, data)
        sha = hashlib.sha256(data).hexdigest()
        known = await self.get(sha)
        if known is not None:
            await self.touch(sha, now)
            return known
        relative = f"{sha[:2]}/{sha}.{info.extension}"
        await asyncio.to_thread(_write_atomically, asset_file(self.folder, relative), data)
        async with self._writes.begin() as conn:
            await conn.execute(
                insert_ignoring_conflicts(conn, Asset.__table__).values(
                    **_row(sha, relative, info, len(data)), source=source, created_at=now,
                    last_used_at=now,
                )
            )  # fmt: skip
        return StoredAsset(sha, relative, info.mime, len(data), info.width, info.height)

    async def get(self, sha256: str) -> StoredAsset | None:
        query = select(
            Asset.sha256, Asset.path, Asset.mime, Asset.size, Asset.width, Asset.height
        ).where(Asset.sha256 == sha256)
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return StoredAsset(*row) if row is not None else None

    async def touch(self, sha256: str, now: datetime) -> None:
        async with self._writes.begin() as conn:
            await conn.execute(update(Asset).where(Asset.sha256 == sha256).values(last_used_at=now))

    async def label(self, sha256: str) -> AssetLabel | None:
        """What the vision model saw in the file; None when it was never described."""
        query = select(Asset.description, Asset.emotions).where(Asset.sha256 == sha256)
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        if row is None or not row.description:
            return None
        return AssetLabel(row.description, tuple(row.emotions.split()))

    async def labels_since(self, since: datetime) -> int:
        """Vision calls made about files since `since`: what the labelling budget counts."""
        query = select(func.count()).select_from(Asset).where(Asset.labelled_at >= since)
        async with self.engine.connect() as conn:
            return int(await conn.scalar(query) or 0)

    async def mark_labelling(self, sha256: str, now: datetime) -> None:
        """Note a vision call about the file before it is made: a crash still counts it."""
        async with self._writes.begin() as conn:
            await conn.execute(update(Asset).where(Asset.sha256 == sha256).values(labelled_at=now))

    async def set_label(self, sha256: str, label: AssetLabel) -> None:
        values = {"description": label.description, "emotions": " ".join(label.emotions)}
        async with self._writes.begin() as conn:
            await conn.execute(update(Asset).where(Asset.sha256 == sha256).values(**values))

    async def record_on_message(self, message_id: int, assets: Mapping[int, str]) -> None:
        """Note on a stored message which asset each of its segments (by index) became."""
        await set_segment_assets(self._writes, message_id, assets)

    async def rewrite_texts(self, message_id: int, texts: Mapping[int, str]) -> str | None:
        """Replace placeholders on a stored message with what its files show (by segment)."""
        return await rewrite_segment_texts(self._writes, message_id, texts)

    async def total_bytes(self) -> int:
        async with self.engine.connect() as conn:
            return int(await conn.scalar(select(func.coalesce(func.sum(Asset.size), 0))) or 0)

    async def prune(self, max_bytes: int, keep: Select[tuple[str]] | None = None) -> int:
        """Drop the least recently used assets until the rest fit in `max_bytes`; never the
        ones whose hash `keep` selects (the media feature's sticker collection)."""
        total = await self.total_bytes()
        if total <= max_bytes:
            return 0
        query = select(Asset.sha256, Asset.path, Asset.size).order_by(
            Asset.last_used_at, Asset.sha256
        )
        if keep is not None:
            query = query.where(Asset.sha256.not_in(keep))
        doomed: list[tuple[str, str]] = []
        async with self.engine.connect() as conn:
            for sha, path, size in await conn.execute(query):
                if total <= max_bytes:
                    break
                doomed.append((sha, path))
                total -= int(size)
        async with self._writes.begin() as conn:
            await conn.execute(delete(Asset).where(Asset.sha256.in_([sha for sha, _ in doomed])))
        for _, path in doomed:
            await asyncio.to_thread(_remove, asset_file(self.folder, path))
        logger.info("assets: {} file(s) dropped to stay under {:,} bytes", len(doomed), max_bytes)
        return len(doomed)


def _row(sha: str, relative: str, info: MediaInfo, size: int) -> dict[str, object]:
    return {
        "sha256": sha,
        "path": relative,
        "mime": info.mime,
        "size": size,
        "width": info.width,
        "height": info.height,
    }


def _write_atomically(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    # Unique per write: two tasks keeping the same new file at once must not share one.
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, target)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        return
