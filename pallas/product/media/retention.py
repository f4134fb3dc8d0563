"""Retention of the asset store: every night the least recently used files go until the folder
is under its cap. What a message said stays; only a picture nobody used for long is dropped."""

from __future__ import annotations

from pallas.product.conversation.jobs.periodic import PeriodicJob
from pallas.store.asset_store import AssetStore
from pallas.store.jobs import ClaimedJob

PRUNE_KIND = "assets.prune"
PRUNE = PeriodicJob(name="asset_retention", kind=PRUNE_KIND, cron="53 4 * * *")
MAX_ASSET_BYTES = 1024**3  # 1 GiB of pictures, stickers and voice


async def prune_assets(job: ClaimedJob, store: AssetStore, max_bytes: int) -> None:
    await store.prune(max_bytes)
