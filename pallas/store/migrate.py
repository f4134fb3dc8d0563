"""Apply Alembic migrations at start-up, over the running async engine."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# The newest revision in migrations/versions (a test holds it to Alembic's own head). A store
# already there needs no Alembic at all, which keeps its ~10 MB of modules out of the process.
HEAD_REVISION = "0026"
MIGRATION_LOCK = 0x5041_4C4C_4153  # "PALLAS": PostgreSQL's advisory lock for migrating


@dataclass(frozen=True)
class Migrations:
    """A feature's own versions folder: a branch of the one history, based on a core
    revision, whose revision ids are not all digits (those are the core's); its newest."""

    folder: Path
    head: str


def alembic_config(
    connection: Connection | None = None, branches: Sequence[Migrations] = ()
) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    folders = [MIGRATIONS_DIR / "versions", *(b.folder for b in branches)]
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("version_locations", os.pathsep.join(str(f) for f in folders))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


async def upgrade_to_head(engine: AsyncEngine, branches: Sequence[Migrations] = ()) -> None:
    """Bring the schema (the core's and the features' tables) up to date; a failure
    propagates and stops start-up."""
    wanted = {HEAD_REVISION, *(b.head for b in branches)}
    async with engine.connect() as conn:
        if wanted <= await conn.run_sync(current_heads):
            return  # a feature switched off keeps its tables, and its row here
        # Its driver may have cached statements over the catalog as it was before another
        # process migrated (asyncpg): once reused they would fail inside the migration's
        # transaction. The migration gets a fresh connection.
        await conn.invalidate()
    async with engine.connect() as conn:
        await conn.run_sync(partial(_upgrade_in_one_transaction, branches=tuple(branches)))


def _upgrade_in_one_transaction(
    connection: Connection, branches: Sequence[Migrations], targets: Sequence[str] = ("heads",)
) -> None:
    """All pending migrations (up to `targets`) commit together or not at all. PostgreSQL's
    DDL is transactional as it is; Python's sqlite3 opens no transaction before DDL, so on
    SQLite the connection begins one itself (and is given back as it was)."""
    from alembic import command

    config = alembic_config(connection, branches)
    if connection.dialect.name != "sqlite":
        with connection.begin():
            # Processes starting together on one server migrate one after another: the
            # lock is held to the end of this transaction, and the next finds the work done.
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
            for target in targets:
                command.upgrade(config, target)
        return
    dbapi = connection.connection.dbapi_connection
    assert dbapi is not None
    level = dbapi.isolation_level
    dbapi.isolation_level = None  # the driver leaves BEGIN and COMMIT to us
    try:
        with connection.begin():
            connection.exec_driver_sql("BEGIN IMMEDIATE")
            for target in targets:
                command.upgrade(config, target)
    finally:
        dbapi.isolation_level = level


def upgrade_to(
    connection: Connection, branches: Sequence[Migrations], targets: Sequence[str]
) -> None:
    """Bring the schema to exactly these revisions (an archive's), in one transaction."""
    _upgrade_in_one_transaction(connection, branches, targets)


def current_heads(connection: Connection) -> set[str]:
    """Every revision the store is at: the core's and one per feature with tables."""
    if not inspect(connection).has_table("alembic_version"):
        return set()
    return set(connection.execute(text("SELECT version_num FROM alembic_version")).scalars())


def current_revision(connection: Connection) -> str | None:
    """The core schema's revision; None for a store Alembic never touched."""
    core = [head for head in current_heads(connection) if head.isdigit()]
    return max(core) if core else None
