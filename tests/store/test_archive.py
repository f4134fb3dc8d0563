"""Backup and restore on the real stores (docs/deploy.md): export, wipe, import gives the
same rows table by table and the same files byte by byte, on each backend and across them
(SQLite into PostgreSQL is the documented move); and what is refused: a store that is not
empty, an archive cut in half, one from a newer version, a path out of the folder."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

import pallas.features  # noqa: F401  the features' tables on the metadata
import pallas.store.export as export_module
from pallas.product.slang.store import SlangStore
from pallas.store.archive import ArchiveError, encode_row
from pallas.store.engine import create_engine
from pallas.store.export import export_store
from pallas.store.migrate import upgrade_to_head
from pallas.store.restore import import_store, read_manifest
from pallas.store.schema_base import Base
from pallas.store.settings_table import SettingsTable
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import BOT_ID, group, message

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


async def fill(engine: AsyncEngine, data_dir: Path) -> None:
    writer = TimelineWriter(engine)
    writer.start()
    try:
        for n in range(30):
            said = message(f"第{n}句，嗯哼酱 ✨", stream=group("800"), user_id=str(40 + n % 3))
            assert isinstance(await writer.write(said), MessageWritten)
    finally:
        await writer.close()
    stream = 1
    await SlangStore(engine).set_meaning(stream, "嗯哼酱", "群主家的猫", "console", NOW)
    await SettingsTable(engine).save("gate", str(stream), {"ambient_probability": 0.1}, NOW)
    (data_dir / "assets" / "ab").mkdir(parents=True)
    (data_dir / "assets" / "ab" / "abcdef.png").write_bytes(bytes(range(256)) * 40)
    (data_dir / "knowledge").mkdir()
    (data_dir / "knowledge" / "town.md").write_text("# 镇\n\n紫色的曼陀罗", encoding="utf-8")


async def rows(engine: AsyncEngine) -> dict[str, list[dict[str, Any]]]:
    found = {}
    async with engine.connect() as conn:
        for table in Base.metadata.sorted_tables:
            order = list(table.primary_key.columns) or list(table.columns)[:1]
            result = await conn.execute(select(table).order_by(*order))
            found[table.name] = [encode_row(list(table.columns), r) for r in result.mappings()]
    return found


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.suffix != ".db"}  # fmt: skip


async def test_export_wipe_import_gives_the_same_store_and_files(
    engine: AsyncEngine, store_url: str, tmp_path: Path
) -> None:
    source_dir, target_dir = tmp_path / "data", tmp_path / "restored"
    source_dir.mkdir()
    await fill(engine, source_dir)
    archive = tmp_path / "backup.tar.gz"
    manifest = await export_store(engine, source_dir, archive)
    assert manifest.tables["message"] == 30 and "knowledge/town.md" in manifest.files
    assert not (tmp_path / "backup.tar.gz.part").exists()

    # Both fixtures name a SQLite file store.db in the same folder: the target is another.
    target = create_engine(store_url.replace("store.db", "target.db"))
    try:
        await import_store(target, target_dir, archive)
        assert await rows(target) == await rows(engine)
        assert files(target_dir) == files(source_dir)
        # The ids go on from the restored ones: a new message takes the next.
        writer = TimelineWriter(target)
        writer.start()
        try:
            written = await writer.write(message("新的一句", stream=group("800")))
        finally:
            await writer.close()
        assert isinstance(written, MessageWritten) and written.message_id == 31
        with pytest.raises(ArchiveError, match="not empty"):
            await import_store(target, target_dir, archive)
    finally:
        await target.dispose()


async def test_a_moved_account_is_mapped(engine: AsyncEngine, tmp_path: Path) -> None:
    await fill(engine, tmp_path / "data")
    archive = tmp_path / "b.tar.gz"
    await export_store(engine, tmp_path / "data", archive)
    target = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'new.db'}")
    try:
        await import_store(target, tmp_path / "new", archive, account_map={BOT_ID: "99999"})
        async with target.connect() as conn:
            [self_id] = (await conn.execute(select(Base.metadata.tables["stream"].c.self_id)
                                            )).scalars().all()  # fmt: skip
        assert self_id == "99999"
    finally:
        await target.dispose()


def _rewrite(archive: Path, out: Path, change: Any) -> None:
    """A copy of the archive with its manifest changed by `change`."""
    with tarfile.open(archive, "r:gz") as source, tarfile.open(out, "w:gz") as target:
        for member in source:
            data = source.extractfile(member).read()  # type: ignore[union-attr]
            if member.name == "manifest.json":
                data = json.dumps(change(json.loads(data))).encode()
            member.size = len(data)
            target.addfile(member, io.BytesIO(data))


async def test_bad_archives_are_refused_before_anything_is_written(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    await fill(engine, tmp_path / "data")
    archive = tmp_path / "b.tar.gz"
    await export_store(engine, tmp_path / "data", archive)
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    newer, future = tmp_path / "newer.tar.gz", tmp_path / "future.tar.gz"
    _rewrite(archive, newer, lambda m: {**m, "format": 99})
    _rewrite(archive, future, lambda m: {**m, "revisions": ["9999"]})
    target = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'new.db'}")
    try:
        with pytest.raises(ArchiveError, match="damaged or cut short"):
            await import_store(target, tmp_path / "new", cut)
        with pytest.raises(ArchiveError, match="newer Pallas"):
            read_manifest(newer)
        with pytest.raises(ArchiveError, match="newer than this Pallas knows"):
            await import_store(target, tmp_path / "new", future)
        assert not (tmp_path / "new").exists()  # no file written for a refused archive
        await import_store(target, tmp_path / "new", archive)  # the whole one still goes in
    finally:
        await target.dispose()


async def test_an_export_while_the_bot_writes_is_one_moment_of_the_store(
    engine: AsyncEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await fill(engine, tmp_path / "data")
    real, wrote = export_module._dump, []

    async def dump_then_the_bot_writes(conn: Any, table: Any, scratch: Path) -> int:
        rows = await real(conn, table, scratch)
        if not wrote:  # after the first table: a new group, person and messages arrive
            writer = TimelineWriter(engine)
            writer.start()
            try:
                for n in range(5):
                    wrote.append(await writer.write(message(f"新来的{n}", stream=group("901"),
                                                            user_id="77")))  # fmt: skip
            finally:
                await writer.close()
        return rows

    monkeypatch.setattr(export_module, "_dump", dump_then_the_bot_writes)
    archive = tmp_path / "live.tar.gz"
    manifest = await export_store(engine, tmp_path / "data", archive)
    assert len(wrote) == 5 and manifest.tables["message"] == 30  # none of the later rows
    target = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'new.db'}")
    try:
        await import_store(target, tmp_path / "new", archive)  # every reference holds
    finally:
        await target.dispose()


async def test_an_import_is_refused_while_a_bot_holds_the_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time; f = open(sys.argv[1], 'a+b'); "
        "fcntl.flock(f.fileno(), fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"),
        f"{path}.lock"], stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        target = create_engine(f"sqlite+aiosqlite:///{path}")
        archive = tmp_path / "none.tar.gz"
        source = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'src.db'}")
        await upgrade_to_head(source)
        await export_store(source, tmp_path / "nothing", archive)
        await source.dispose()
        with pytest.raises(ArchiveError, match="already used by another running Pallas"):
            await import_store(target, tmp_path / "restored", archive)
        await target.dispose()
    finally:
        holder.kill()
        holder.wait()
