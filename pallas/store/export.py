"""`python -m pallas export FILE`: one consistent snapshot of the whole store and of every
file the bot wrote under PALLAS_DATA_DIR, as one archive (archive.py).

The tables are read in one transaction (SQLite's WAL and PostgreSQL's REPEATABLE READ give a
snapshot), so a running bot may keep writing. The archive is written beside FILE and renamed
into place at the end: a kill -9 in the middle leaves no FILE, only `FILE.part`.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import tarfile
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Table, select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.store.archive import FILES, FORMAT, MANIFEST, TABLES, Manifest, encode_row
from pallas.store.migrate import current_heads
from pallas.store.schema_base import Base

ROWS_PER_READ = 2_000
# What is not copied from the data folder: the SQLite database (it is in the tables), its
# journals and lock, the backups themselves and half-written files.
SKIPPED_SUFFIXES = (".part", "-wal", "-shm", "-journal")
SKIPPED_DIRS = frozenset({"backups"})


def data_files(data_dir: Path, database: Path | None) -> Iterator[tuple[Path, str]]:
    """(file, its path in the archive) of every file the bot wrote, in a stable order."""
    skipped = {database.resolve()} if database is not None else set()
    for root, dirs, files in os.walk(data_dir):
        dirs[:] = sorted(d for d in dirs if not (Path(root) == data_dir and d in SKIPPED_DIRS))
        for name in sorted(files):
            path = Path(root) / name
            if path.is_symlink() or name.endswith(SKIPPED_SUFFIXES) or name.endswith(".lock"):
                continue
            if path.resolve() in skipped or (database and name.startswith(database.name + "-")):
                continue
            yield path, path.relative_to(data_dir).as_posix()


def sqlite_file(url: str) -> Path | None:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).expanduser()


async def export_store(engine: AsyncEngine, data_dir: Path, target: Path) -> Manifest:
    """Write the archive to `target`; what it holds."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    database = sqlite_file(engine.url.render_as_string(hide_password=False))
    with tempfile.TemporaryDirectory(prefix="pallas-export-") as scratch:
        manifest = await _tables(engine, Path(scratch))
        with tarfile.open(partial, "w:gz", compresslevel=6) as archive:
            for name in sorted(manifest.tables):
                archive.add(Path(scratch) / f"{name}.jsonl", arcname=f"{TABLES}{name}.jsonl")
            if data_dir.is_dir():
                for path, inside in data_files(data_dir, database):
                    manifest.files[inside] = await asyncio.to_thread(_add_file, archive, path,
                                                                     inside)  # fmt: skip
            _add_bytes(archive, MANIFEST, manifest.to_json())
    os.replace(partial, target)
    return manifest


async def _tables(engine: AsyncEngine, scratch: Path) -> Manifest:
    options = {"isolation_level": "REPEATABLE READ"} if engine.dialect.name != "sqlite" else {}
    async with engine.connect() as conn:
        conn = await conn.execution_options(**options)
        async with conn.begin():
            revisions = sorted(await conn.run_sync(current_heads))
            created = datetime.now(UTC).isoformat()
            manifest = Manifest(FORMAT, revisions, created, engine.dialect.name)
            for table in Base.metadata.sorted_tables:
                manifest.tables[table.name] = await _dump(conn, table, scratch)
    return manifest


async def _dump(conn: AsyncConnection, table: Table, scratch: Path) -> int:
    columns = list(table.columns)
    order = list(table.primary_key.columns) or columns[:1]
    rows = 0
    with (scratch / f"{table.name}.jsonl").open("w", encoding="utf-8") as out:
        result = await conn.stream(select(table).order_by(*order))
        async for chunk in result.mappings().partitions(ROWS_PER_READ):
            lines = [_json_line(encode_row(columns, row)) for row in chunk]
            out.write("".join(lines))
            rows += len(chunk)
    return rows


def _json_line(item: dict[str, object]) -> str:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n"


def _add_file(archive: tarfile.TarFile, path: Path, inside: str) -> dict[str, object]:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        data = source.read()
    digest.update(data)
    info = tarfile.TarInfo(FILES + inside)
    info.size, info.mtime, info.mode = len(data), int(path.stat().st_mtime), 0o644
    archive.addfile(info, io.BytesIO(data))
    return {"size": len(data), "sha256": digest.hexdigest()}


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
    archive.addfile(info, io.BytesIO(data))
