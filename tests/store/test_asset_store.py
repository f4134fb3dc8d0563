"""The asset store on SQLite and PostgreSQL with real files: stored once by content, checked
by content, written whole, pruned least recently used first."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.assets import asset_file, asset_path
from pallas.core.media import NotMedia
from pallas.store.asset_store import AssetStore
from tests.support.pictures import picture

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(engine: AsyncEngine, tmp_path: Path) -> AssetStore:
    return AssetStore(engine, tmp_path / "assets")


async def test_the_same_picture_twice_is_stored_once(store: AssetStore) -> None:
    first = await store.put(picture(), T0)
    again = await store.put(picture(), T0 + timedelta(minutes=1))
    assert first == again
    assert (first.mime, first.width, first.height) == ("image/png", 8, 6)
    relative = asset_path(first.reference)
    assert relative is not None
    assert asset_file(store.folder, relative).read_bytes() == picture()
    files = [p for p in store.folder.rglob("*") if p.is_file()]
    assert len(files) == 1  # no temporary file left behind either
    assert await store.total_bytes() == len(picture())


async def test_a_jpeg_named_anything_is_a_jpeg(store: AssetStore) -> None:
    stored = await store.put(picture(fmt="JPEG"), T0)
    assert stored.mime == "image/jpeg" and stored.path.endswith(".jpg")


@pytest.mark.parametrize(
    "data",
    [
        b"%PDF-1.7 not a picture",
        b"",
        picture()[:40],  # a PNG cut short
        picture()[:60] + b"\x00" * 20 + picture()[80:],  # corrupt chunk data
    ],
)
async def test_what_is_not_a_usable_image_is_refused_and_not_kept(
    store: AssetStore, data: bytes
) -> None:
    with pytest.raises(NotMedia):
        await store.put(data, T0)
    assert await store.total_bytes() == 0
    assert not store.folder.exists() or not any(p.is_file() for p in store.folder.rglob("*"))


async def test_pruning_drops_the_least_recently_used(store: AssetStore) -> None:
    red = await store.put(picture("red"), T0)
    green = await store.put(picture("green"), T0 + timedelta(minutes=1))
    blue = await store.put(picture("blue"), T0 + timedelta(minutes=2))
    await store.touch(red.sha256, T0 + timedelta(minutes=3))  # red was used again
    keep = red.size + blue.size
    assert await store.prune(keep) == 1
    assert await store.get(green.sha256) is None
    assert not asset_file(store.folder, green.path).exists()
    assert await store.get(red.sha256) is not None and await store.get(blue.sha256) is not None
    assert await store.prune(keep) == 0


async def test_the_same_new_file_kept_twice_at_once_is_one_file(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    """A fetch and a turn keeping the same new picture together must not trip over each
    other's temporary file."""
    store = AssetStore(engine, tmp_path / "assets")
    data = picture("navy", (9, 9))
    kept = await asyncio.gather(*(store.put(data, T0) for _ in range(8)))
    assert len({asset.path for asset in kept}) == 1
    folder = (tmp_path / "assets").rglob("*")
    assert [f.name for f in folder if f.is_file()] == [kept[0].path.rsplit("/", 1)[-1]]
