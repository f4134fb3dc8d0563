"""`python -m pallas import FILE`: an archive (archive.py) into an empty store, SQLite or
PostgreSQL, and its files into PALLAS_DATA_DIR. It is also the way to move from SQLite to
PostgreSQL: export, point PALLAS_DATABASE_URL at the server, import.

  read the manifest: a newer format or a schema this version does not know -> refused
  bring the store to the archive's schema; any row in any table -> refused (not empty)
  files into the data folder (each checked against its SHA-256), then every table's rows in
  one transaction, then the schema to this version's head

A kill -9 in the middle leaves the store empty (the rows commit together) and the files
rewritten by the next run; an archive cut short is refused before anything is written.
`account_map` rewrites the bot's own QQ number where it is stored, for a store moving to
another account.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tarfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Connection,
    MetaData,
    Table,
    func,
    insert,
    inspect,
    select,
    text,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.archive import (
    FILES,
    FORMAT,
    MANIFEST,
    TABLES,
    ArchiveError,
    Manifest,
    decode_row,
    safe_member_path,
)
from pallas.store.export import sqlite_file
from pallas.store.failures import StoreStartupError
from pallas.store.migrate import Migrations, alembic_config, upgrade_to, upgrade_to_head
from pallas.store.preflight import hold_sqlite_file
from pallas.store.processes import RUNTIME_TABLES
from pallas.store.schema_base import Base

ROWS_PER_INSERT = 1_000
# Where the bot's own QQ number is stored: every `self_id` and `account` column, and these.
ACCOUNT_COLUMNS = frozenset({("identity", "user_id"), ("setting", "scope_id"),
                             ("setting_change", "scope_id")})  # fmt: skip
_DAMAGED = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, OSError)


def read_manifest(archive: Path) -> Manifest:
    try:
        with tarfile.open(archive, "r:gz") as tar:
            member = tar.extractfile(MANIFEST)
            if member is None:
                raise ArchiveError("the archive has no manifest: it is not a Pallas backup")
            manifest = Manifest.from_json(member.read())
    except KeyError as exc:
        raise ArchiveError("the archive has no manifest: it is not a Pallas backup") from exc
    except _DAMAGED as exc:
        raise ArchiveError(f"the archive is damaged or cut short ({exc})") from exc
    if manifest.format > FORMAT:
        raise ArchiveError(
            f"the archive was written by a newer Pallas (format {manifest.format}); "
            "update this one first"
        )
    return manifest


async def import_store(
    engine: AsyncEngine,
    data_dir: Path,
    archive: Path,
    branches: Sequence[Migrations] = (),
    account_map: Mapping[str, str] | None = None,
) -> Manifest:
    manifest = read_manifest(archive)
    _check_archive(archive, manifest)  # nothing is written for an archive that is not whole
    url = engine.url.render_as_string(hide_password=False)
    database = sqlite_file(url)
    if database is not None:
        try:  # a bot running on that file would write into the restore
            hold_sqlite_file(database, url)
        except StoreStartupError as exc:
            raise ArchiveError(str(exc)) from exc
    async with engine.connect() as conn:
        await conn.run_sync(_must_be_empty)
    async with engine.connect() as conn:
        await conn.run_sync(_to_revisions, manifest.revisions, branches)
    _restore_files(archive, data_dir, database)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_restore_rows, archive, manifest, dict(account_map or {}))
    except IntegrityError as exc:
        raise ArchiveError(
            "the rows do not fit together (with --account: the new number is already in the "
            f"archive?): {str(exc.orig)[:200]}"
        ) from exc
    await upgrade_to_head(engine, branches)
    return manifest


def _check_archive(archive: Path, manifest: Manifest) -> None:
    """Every table and file the manifest names is in the archive, whole, with its SHA-256;
    no member is anything but a file or a folder, or names a place outside the data folder."""
    wanted = {f"{TABLES}{name}.jsonl" for name in manifest.tables}
    wanted |= {FILES + path for path in manifest.files}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                _check_member(tar, member, manifest)
                wanted.discard(member.name)
    except _DAMAGED as exc:
        raise ArchiveError(f"the archive is damaged or cut short ({exc})") from exc
    if wanted:
        raise ArchiveError(f"the archive is incomplete: {len(wanted)} part(s) missing")


def _check_member(tar: tarfile.TarFile, member: tarfile.TarInfo, manifest: Manifest) -> None:
    if member.isdir():
        return
    if not member.isfile():
        raise ArchiveError(f"the archive holds something that is not a file: {member.name!r}")
    digest = hashlib.sha256()
    source = tar.extractfile(member)
    while source is not None and (block := source.read(1 << 20)):
        digest.update(block)  # read to the end: a cut stream fails here
    if member.name.startswith(FILES):
        inside = safe_member_path(member.name[len(FILES) :]).as_posix()
        expected = manifest.files.get(inside)
        if expected is None:
            raise ArchiveError(f"the archive holds a file its manifest does not: {inside}")
        if digest.hexdigest() != expected.get("sha256"):
            raise ArchiveError(f"the archive's copy of {inside} is damaged")


def _to_revisions(conn: Connection, revisions: list[str], branches: Sequence[Migrations]) -> None:
    """The empty store brought to the schema the archive was written at, in one transaction."""
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    config = alembic_config(conn, branches)
    known = {rev.revision for rev in ScriptDirectory.from_config(config).walk_revisions()}
    unknown = [r for r in revisions if r not in known]
    if unknown:
        raise ArchiveError(
            f"the archive's schema {unknown} is newer than this Pallas knows; update it first"
        )
    try:
        upgrade_to(conn, branches, revisions)
    except CommandError as exc:
        raise ArchiveError(f"the store cannot take the archive's schema ({exc})") from exc


def _must_be_empty(conn: Connection) -> None:
    for name in inspect(conn).get_table_names():
        if name in ("alembic_version", *RUNTIME_TABLES) or name not in Base.metadata.tables:
            continue
        table = Base.metadata.tables[name]
        if conn.execute(select(func.count()).select_from(table)).scalar():
            raise ArchiveError(
                f"the store is not empty (table {name} has rows): import only into a new store"
            )


def _restore_files(archive: Path, data_dir: Path, database: Path | None) -> None:
    """The archive's files into the data folder (checked already); never over the store's
    own SQLite file, its journals or its lock."""
    own = set()
    if database is not None:
        base = database.resolve()
        own = {base, *(base.with_name(base.name + s) for s in ("-wal", "-shm", ".lock"))}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if not member.name.startswith(FILES) or not member.isfile():
                continue
            inside = safe_member_path(member.name[len(FILES) :])
            target = data_dir.joinpath(*inside.parts)
            source = tar.extractfile(member)
            if source is None or target.resolve() in own:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".part")
            with partial.open("wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
            os.replace(partial, target)


def _restore_rows(
    conn: Connection, archive: Path, manifest: Manifest, account_map: dict[str, str]
) -> None:
    """Every table's rows, through the tables as the store has them at the archive's schema
    (a later version's Python defaults and columns are not the archive's)."""
    actual = MetaData()
    actual.reflect(conn)
    with tarfile.open(archive, "r:gz") as tar:
        for model in Base.metadata.sorted_tables:
            table = actual.tables.get(model.name)
            if model.name not in manifest.tables or table is None:
                continue
            _as_null(table)
            source = tar.extractfile(f"{TABLES}{model.name}.jsonl")
            assert source is not None
            types = {c.name: c for c in model.columns}
            names = set(table.columns.keys())
            batch: list[dict[str, Any]] = []
            for line in source:
                row = decode_row(types, json.loads(line), names)
                batch.append(_mapped(model.name, row, account_map))
                if len(batch) == ROWS_PER_INSERT:
                    conn.execute(insert(table), batch)
                    batch = []
            if batch:
                conn.execute(insert(table), batch)
    if conn.dialect.name == "postgresql":
        _move_sequences(conn)


def _as_null(table: Table) -> None:
    """A JSON column's None is SQL NULL, as it was in the store, not the JSON `null`."""
    for column in table.columns:
        if isinstance(column.type, JSON):
            column.type = JSON(none_as_null=True)


# The processes of the store an archive came from claim nothing in the new one: their rows
# are the leftovers from before names, taken by the first process that starts.
PROCESS_CLAIMS = {("message", "stored_by"), ("outbox", "holder")}


def _mapped(table: str, row: dict[str, Any], account_map: dict[str, str]) -> dict[str, Any]:
    for claim in PROCESS_CLAIMS:
        if claim[0] == table and claim[1] in row:
            row[claim[1]] = None
    if not account_map:
        return row
    for name, value in row.items():
        mapped = name in ("self_id", "account") or (table, name) in ACCOUNT_COLUMNS
        if mapped and isinstance(value, str) and value in account_map:
            row[name] = account_map[value]
    return row


def _move_sequences(conn: Connection) -> None:
    """Rows came with their ids: each serial id's sequence moves past the largest."""
    for table in Base.metadata.sorted_tables:
        id_column = table.columns.get("id")
        if id_column is None or not id_column.autoincrement:
            continue
        conn.execute(text(
            f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
            f"COALESCE((SELECT max(id) FROM {table.name}), 0) + 1, false)"
        ))  # fmt: skip
