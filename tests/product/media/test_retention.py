"""Asset retention as the nightly job runs it, on a real store and real files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.assets import asset_file
from pallas.product.media.retention import PRUNE_KIND, prune_assets
from pallas.store.asset_store import AssetStore
from pallas.store.jobs import ClaimedJob
from tests.support.pictures import picture

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def test_the_nightly_run_keeps_the_folder_under_its_cap(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    store = AssetStore(engine, tmp_path / "assets")
    colors = ["red", "green", "blue", "white"]
    stored = [
        await store.put(picture(c, (16, 16)), T0 + timedelta(minutes=i))
        for i, c in enumerate(colors)
    ]
    cap = sum(s.size for s in stored[2:])
    job = ClaimedJob(1, PRUNE_KIND, {}, None, 1, 3, T0)
    await prune_assets(job, store, cap)
    assert await store.total_bytes() <= cap
    assert [await store.get(s.sha256) is not None for s in stored] == [False, False, True, True]
    assert [asset_file(store.folder, s.path).exists() for s in stored] == [False, False, True, True]
