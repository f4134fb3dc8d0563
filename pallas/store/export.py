"""`python -m pallas export FILE`: one consistent snapshot of the whole store and of every
file the bot wrote under PALLAS_DATA_DIR, as one archive (archive.py).

The tables are read in one read transaction: on SQLite an explicit BEGIN (the driver opens
none before a SELECT) under WAL, on PostgreSQL REPEATABLE READ. So a running bot may keep
writing; nothing it writes meanwhile is half in the archive. The rows go to scratch files
beside FILE, then the archive is packed in a thread (the bot's event loop keeps serving) as
`FILE.part` and renamed into place: a kill -9 in the middle leaves no FILE.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Table, select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.store.archive import FILES, FORMAT, MANIFEST, TABLES, Manifest, encode_row
from pallas.store.migrate import current_heads
from pallas.store.processes import RUNTIME_TABLES
from pallas.store.schema_base import Base

ROWS_PER_READ = 2_000
CHUNK = 1 << 20
SQLITE_MAGIC = b"SQLite format 3\x00"
# What is never copied from the data folder: SQLite databases (their rows are the tables) and
# their journals and locks, archives (a backup holds no earlier backup), the backups folder,
# half-written files.
SKIPPED_SUFFIXES = (".part", "-wal", "-shm", "-journal", ".lock", ".tar.gz")
SKIPPED_DIRS = frozenset({"backups"})


def data_files(data_dir: Path, skipped: set[Path]) -> Iterator[tuple[Path, str]]:
    """(file, its path in the archive) of every file the bot wrote, in a stable order."""
    for root, dirs, files in os.walk(data_dir):
        here = Path(root)
        dirs[:] = sorted(d for d in dirs if not (here == data_dir and d in SKIPPED_DIRS)
                         and (here / d).resolve() not in skipped)  # fmt: skip
        for name in sorted(files):
            path = here / name
            if path.is_symlink() or name.endswith(SKIPPED_SUFFIXES) or _is_sqlite(path):
                continue
            yield path, path.relative_to(data_dir).as_posix()


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as head:
            return head.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return True  # unreadable: not ours to copy


def sqlite_file(url: str) -> Path | None:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).expanduser()


async def export_store(engine: AsyncEngine, data_dir: Path, target: Path) -> Manifest:
    """Write the archive to `target`; what it holds."""
    target = target.absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    scratch = Path(tempfile.mkdtemp(prefix=".pallas-export-", dir=target.parent))
    try:
        manifest = await _tables(engine, scratch)
        skipped = {target.parent.resolve(), scratch.resolve()}
        await asyncio.to_thread(_pack, partial, scratch, manifest, data_dir, skipped)
        os.replace(partial, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        partial.unlink(missing_ok=True)
    return manifest


async def _tables(engine: AsyncEngine, scratch: Path) -> Manifest:
    async with _snapshot(engine) as conn:
        revisions = sorted(await conn.run_sync(current_heads))
        created = datetime.now(UTC).isoformat()
        manifest = Manifest(FORMAT, revisions, created, engine.dialect.name)
        for table in Base.metadata.sorted_tables:
            if table.name not in RUNTIME_TABLES:
                manifest.tables[table.name] = await _dump(conn, table, scratch)
    return manifest


@asynccontextmanager
async def _snapshot(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection whose reads all see one moment of the store."""
    if engine.dialect.name != "sqlite":
        async with engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="REPEATABLE READ")
            async with conn.begin():
                yield conn
        return
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.exec_driver_sql("BEGIN")  # deferred: the first read fixes the snapshot
        try:
            yield conn
        finally:
            await conn.exec_driver_sql("ROLLBACK")  # it only read


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


def _pack(
    partial: Path, scratch: Path, manifest: Manifest, data_dir: Path, skipped: set[Path]
) -> None:
    """The archive, in a worker thread: the tables, the files, the manifest last."""
    with tarfile.open(partial, "w:gz", compresslevel=6) as archive:
        for name in sorted(manifest.tables):
            archive.add(scratch / f"{name}.jsonl", arcname=f"{TABLES}{name}.jsonl")
        if data_dir.is_dir():
            for path, inside in data_files(data_dir, skipped):
                manifest.files[inside] = _add_file(archive, path, inside)
        data = manifest.to_json()
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
        archive.addfile(info, io.BytesIO(data))


def _add_file(archive: tarfile.TarFile, path: Path, inside: str) -> dict[str, object]:
    """A file streamed in (hashed first, then copied), whatever its size."""
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for block in iter(lambda: source.read(CHUNK), b""):
            digest.update(block)
        size = source.tell()
        source.seek(0)
        info = tarfile.TarInfo(FILES + inside)
        info.size, info.mtime, info.mode = size, int(path.stat().st_mtime), 0o644
        archive.addfile(info, source)
    return {"size": size, "sha256": digest.hexdigest()}
