"""Retention of the asset store: every night the least recently used files go until the folder
is under its cap. What a message said stays; only a picture nobody used for long is dropped."""

from __future__ import annotations

from sqlalchemy import select

from pallas.product.conversation.jobs.periodic import PeriodicJob
from pallas.product.media.tables import Sticker
from pallas.store.asset_store import AssetStore
from pallas.store.jobs import ClaimedJob

PRUNE_KIND = "assets.prune"
PRUNE = PeriodicJob(name="asset_retention", kind=PRUNE_KIND, cron="53 4 * * *")
MAX_ASSET_BYTES = 1024**3  # 1 GiB of pictures, stickers and voice


async def prune_assets(job: ClaimedJob, store: AssetStore, max_bytes: int) -> None:
    await pruned_keeping_stickers(store, max_bytes)


async def pruned_keeping_stickers(store: AssetStore, max_bytes: int) -> int:
    """How many files went; the bot's own sticker collection is kept whatever its age, an
    entry switched off included (docs/media.md)."""
    return await store.prune(max_bytes, keep=select(Sticker.sha256))
