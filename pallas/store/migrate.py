"""Apply Alembic migrations at start-up, over the running async engine."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# The newest revision in migrations/versions (a test holds it to Alembic's own head). A store
# already there needs no Alembic at all, which keeps its ~10 MB of modules out of the process.
HEAD_REVISION = "0017"


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


async def upgrade_to_head(engine: AsyncEngine) -> None:
    """Bring the schema up to date; a failure propagates and stops start-up."""
    async with engine.connect() as conn:
        if await conn.run_sync(current_revision) == HEAD_REVISION:
            return
    async with engine.connect() as conn:
        await conn.run_sync(_upgrade_in_one_transaction)


def _upgrade_in_one_transaction(connection: Connection) -> None:
    """All pending migrations commit together or not at all. PostgreSQL's DDL is
    transactional as it is; Python's sqlite3 opens no transaction before DDL, so on SQLite
    the connection begins one itself (and is given back as it was)."""
    from alembic import command

    if connection.dialect.name != "sqlite":
        with connection.begin():
            command.upgrade(alembic_config(connection), "head")
        return
    dbapi = connection.connection.dbapi_connection
    assert dbapi is not None
    level = dbapi.isolation_level
    dbapi.isolation_level = None  # the driver leaves BEGIN and COMMIT to us
    try:
        with connection.begin():
            connection.exec_driver_sql("BEGIN IMMEDIATE")
            command.upgrade(alembic_config(connection), "head")
    finally:
        dbapi.isolation_level = level


def current_revision(connection: Connection) -> str | None:
    """The store's schema revision; None for a store Alembic never touched."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
