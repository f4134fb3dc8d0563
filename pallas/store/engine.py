"""One async engine per process, configured for the backend it talks to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

SQLITE_BUSY_TIMEOUT_MS = 5000


def create_engine(url: str) -> AsyncEngine:
    """Create the engine; SQLite gets WAL, a busy timeout and foreign keys on every connection."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        _ensure_parent_dir(parsed.database)
        engine = create_async_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(url, pool_pre_ping=True)


def backend_name(engine: AsyncEngine) -> str:
    return engine.dialect.name


def _ensure_parent_dir(database: str | None) -> None:
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    # NORMAL in WAL mode: a committed transaction survives a process crash; only an OS crash
    # or power loss can lose the last commits. See docs/architecture.md, "Durability".
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
