"""The nightly backup's job on a real store: one archive per fire time (a run again after a
crash writes the same one), only the newest `keep` left, and it restores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.backup.feature import archive_name, run_backup, stale
from pallas.store.jobs import ClaimedJob
from pallas.store.restore import read_manifest

FIRED = datetime(2026, 12, 6, 19, 30, tzinfo=UTC)


def job(fired: datetime, retried_at: datetime | None = None) -> ClaimedJob:
    key = f"periodic:nightly_backup:{fired.isoformat()}"
    return ClaimedJob(1, "backup.nightly", {}, key, 1, 5, retried_at or fired)


async def test_archives_are_made_per_night_and_only_the_newest_kept(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    data, folder = tmp_path / "data", tmp_path / "data" / "backups"
    folder.mkdir(parents=True)
    (data / "note.txt").write_text("留着", encoding="utf-8")
    (folder / "unrelated.txt").write_text("not ours", encoding="utf-8")
    for night in range(4):
        fired = FIRED + timedelta(days=night)
        await run_backup(job(fired), engine, data, folder, keep=2)
    third = FIRED + timedelta(days=3)
    (folder / (archive_name(third) + ".part")).write_bytes(b"half")  # a run killed half-way
    await run_backup(job(third, third + timedelta(minutes=7)), engine, data, folder, keep=2)
    kept = sorted(p.name for p in folder.iterdir())
    assert kept == [archive_name(FIRED + timedelta(days=2)),
                    archive_name(FIRED + timedelta(days=3)), "unrelated.txt"]  # fmt: skip
    manifest = read_manifest(folder / kept[-2])
    assert "note.txt" in manifest.files and not any("backups" in f for f in manifest.files)


def test_stale_archives_are_the_oldest_beyond_keep() -> None:
    names = [archive_name(FIRED + timedelta(days=d)) for d in (2, 0, 1)] + ["x.tar.gz"]
    assert stale(names, 1) == [archive_name(FIRED), archive_name(FIRED + timedelta(days=1))]
    assert stale(names, 5) == []
