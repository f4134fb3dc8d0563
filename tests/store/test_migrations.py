from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from pallas.store.engine import create_engine
from pallas.store.migrate import upgrade_to_head
from pallas.store.models import Base


async def test_migrations_produce_exactly_the_models_schema(store_url: str) -> None:
    engine = create_engine(store_url)
    await upgrade_to_head(engine)
    await upgrade_to_head(engine)  # a second start changes nothing
    async with engine.connect() as conn:
        diff = await conn.run_sync(
            lambda sync: compare_metadata(
                MigrationContext.configure(sync, opts={"compare_type": True}), Base.metadata
            )
        )
        tables = await conn.run_sync(lambda sync: set(inspect(sync).get_table_names()))
    await engine.dispose()
    assert diff == []
    assert tables == set(Base.metadata.tables) | {"alembic_version"}


async def test_sqlite_is_tuned_and_its_folder_created(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'sub' / 'm.db'}")
    await upgrade_to_head(engine)
    async with engine.connect() as conn:
        journal = (await conn.execute(text("PRAGMA journal_mode"))).scalar()
        foreign_keys = (await conn.execute(text("PRAGMA foreign_keys"))).scalar()
        busy = (await conn.execute(text("PRAGMA busy_timeout"))).scalar()
        version = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
    await engine.dispose()
    assert (journal, foreign_keys, busy) == ("wal", 1, 5000)
    assert version == "0009"
