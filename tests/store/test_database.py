"""The one rule for writing to a database (pallas/store/database.py), on both backends."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.database import Database
from pallas.store.engine import backend_name, create_engine


async def test_every_writer_of_a_sqlite_database_holds_its_one_lock(engine: AsyncEngine) -> None:
    first, second = Database.of(engine).writes(), Database.of(engine).writes()
    sqlite = backend_name(engine) == "sqlite"
    assert (first.lock is second.lock) == sqlite  # PostgreSQL: each writer keeps its own order
    async with first.begin() as conn:
        await conn.execute(text("SELECT 1"))
        assert first.lock.locked()
        assert second.lock.locked() == sqlite  # another store's write waits here on SQLite


async def test_databases_apart_share_nothing_and_a_disposed_engine_is_let_go(
    tmp_path: Path,
) -> None:
    one = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'one.db'}")
    two = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'two.db'}")
    assert Database.of(one).writes().lock is not Database.of(two).writes().lock
    gone = weakref.ref(one)
    await one.dispose()
    del one
    gc.collect()
    assert gone() is None  # the lock is kept only while the engine lives
    await two.dispose()

