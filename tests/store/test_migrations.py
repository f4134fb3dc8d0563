from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection

import pallas.features  # noqa: F401  the features' tables (memory's, persona's) on the metadata
from pallas.store.engine import create_engine
from pallas.store.migrate import (
    HEAD_REVISION,
    Migrations,
    alembic_config,
    current_heads,
    current_revision,
    upgrade_to_head,
)
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
    assert version == HEAD_REVISION


def test_the_known_head_is_alembics_head() -> None:
    from alembic.script import ScriptDirectory

    from pallas.store.migrate import HEAD_REVISION, alembic_config

    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD_REVISION


def test_a_store_already_at_head_starts_without_loading_alembic(tmp_path: Path) -> None:
    # Run in fresh interpreters: this one has Alembic loaded by the tests above.
    import subprocess
    import sys

    script = (
        "import asyncio, sys\n"
        "from pallas.store.engine import create_engine\n"
        "from pallas.store.migrate import upgrade_to_head\n"
        f"engine = create_engine('sqlite+aiosqlite:///{tmp_path / 'h.db'}')\n"
        "asyncio.run(upgrade_to_head(engine))\n"
        "print('alembic' in sys.modules)\n"
    )
    repo = Path(__file__).resolve().parents[2]
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    ]
    assert runs == ["True", "False"]  # the first start migrates; the second has nothing to do


async def test_a_migration_that_fails_leaves_the_schema_as_it_was(tmp_path: Path) -> None:
    # A table of the newest revision is in the way: every revision before it ran, and must
    # be undone with it.
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'f.db'}")
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE setting (x INTEGER)"))
    with pytest.raises(OperationalError, match="already exists"):
        await upgrade_to_head(engine)
    async with engine.connect() as conn:
        tables = await conn.run_sync(lambda sync: set(inspect(sync).get_table_names()))
        isolation = await conn.run_sync(
            lambda sync: sync.connection.dbapi_connection.isolation_level
        )
    await engine.dispose()
    assert tables == {"setting"}
    assert isolation == ""  # the connection went back to the pool as the driver made it


# The example feature's own versions folder (tests/support/example_feature); its module is
# not imported here, so its table never joins this process's metadata.
EXAMPLE = Migrations(
    Path(__file__).resolve().parents[1] / "support" / "example_feature" / "migrations",
    "example_0001",
)


async def test_a_features_branch_is_migrated_beside_the_core(store_url: str) -> None:
    engine = create_engine(store_url)
    try:
        await upgrade_to_head(engine, [EXAMPLE])
        await upgrade_to_head(engine, [EXAMPLE])  # at its head: nothing runs
        async with engine.connect() as conn:
            heads = await conn.run_sync(current_heads)
            core = await conn.run_sync(current_revision)
            tables = await conn.run_sync(lambda sync: set(inspect(sync).get_table_names()))
        assert heads == {HEAD_REVISION, "example_0001"} and core == HEAD_REVISION
        assert "example_mention" in tables
        await upgrade_to_head(engine)  # the feature switched off: its row and table wait
        async with engine.connect() as conn:
            assert await conn.run_sync(current_heads) == {HEAD_REVISION, "example_0001"}
    finally:
        await engine.dispose()


async def test_groups_each_account_saw_apart_become_one_when_upgraded(store_url: str) -> None:
    """A store from before 0021 where two accounts each had the same group (docs/accounts.md):
    one stream after the upgrade, every message kept, a clashing member row not doubled."""
    from alembic import command

    engine = create_engine(store_url)
    async with engine.connect() as conn:
        await conn.run_sync(lambda sync: command.upgrade(alembic_config(sync), "0020"))
        await conn.commit()
    async with engine.begin() as conn:
        await _old_store_rows(conn)
    await upgrade_to_head(engine)
    async with engine.connect() as conn:
        streams = (await conn.execute(text("SELECT id, kind FROM stream ORDER BY id"))).all()
        messages = (await conn.execute(text(
            "SELECT stream_id, platform_message_id, account FROM message ORDER BY id"
        ))).all()  # fmt: skip
        members = (await conn.execute(text("SELECT stream_id, card FROM member"))).all()
        accounts = (await conn.execute(text("SELECT stream_id, self_id FROM stream_account"))).all()
        job = (await conn.execute(text("SELECT payload FROM job"))).scalar()
    await engine.dispose()
    assert [tuple(s) for s in streams] == [(2, "group"), (3, "private")]  # the busier one kept
    # Every message kept, each with the account whose id it carries.
    assert sorted(tuple(m) for m in messages) == [
        (2, "1", "10002"), (2, "1~1", "10001"), (2, "2", "10002"), (2, "3", "10002")
    ]  # fmt: skip
    assert [tuple(m) for m in members] == [(2, "c2")]
    assert sorted(tuple(a) for a in accounts) == [(2, "10001"), (2, "10002")]
    payload = job if isinstance(job, dict) else json.loads(job)
    assert payload == {"stream_id": 2}  # queued work follows the group


async def _old_store_rows(conn: AsyncConnection) -> None:
    now = "'2026-12-01 00:00:00+00:00'"
    await conn.execute(text(
        "INSERT INTO stream (id, platform, self_id, kind, external_id, name, created_at) "
        f"VALUES (1, 'qq', '10001', 'group', '700', '', {now}), "
        f"(2, 'qq', '10002', 'group', '700', '', {now}), "
        f"(3, 'qq', '10002', 'private', '42', '', {now})"
    ))  # fmt: skip
    await conn.execute(text(
        f"INSERT INTO person (id, display_name, created_at) VALUES (1, 'm', {now})"
    ))  # fmt: skip
    for sid, pid in ((1, "1"), (2, "1"), (2, "2"), (2, "3")):
        await conn.execute(text(
            "INSERT INTO message (stream_id, sender_person_id, platform_message_id, time, "
            "stored_at, text, segments, mentions, mentions_all, is_poke, from_bot, recalled, "
            f"suppressed, truncated) VALUES ({sid}, 1, '{pid}', {now}, {now}, 't', '[]', "
            "'[]', false, false, false, false, false, false)"
        ))  # fmt: skip
    await conn.execute(text(
        "INSERT INTO job (kind, payload, status, due_at, attempts, max_attempts, last_error, "
        "created_at, updated_at) VALUES ('memory.extract', '{\"stream_id\": 1}', "
        f"'pending', {now}, 0, 5, '', {now}, {now})"
    ))  # fmt: skip
    for sid in (1, 2):
        await conn.execute(text(
            "INSERT INTO member (stream_id, person_id, card, role, title, updated_at) "
            f"VALUES ({sid}, 1, 'c{sid}', 'member', '', {now})"
        ))  # fmt: skip


async def test_processes_starting_together_migrate_one_after_another(store_url: str) -> None:
    """On PostgreSQL several processes may start at once on a new store: an advisory lock
    makes them migrate in turn, and the later ones find the schema there (SQLite's file lock
    admits only one process, and the migration takes its write lock)."""
    engines = [create_engine(store_url) for _ in range(3)]
    try:
        # A SQLite file is made (and put in WAL mode) by the one process that owns it:
        # three connections switching a new file's journal mode at once may be refused
        # outright by SQLite's deadlock avoidance, which no migration would meet.
        async with engines[0].connect():
            pass
        await asyncio.gather(*(upgrade_to_head(engine) for engine in engines))
        async with engines[0].connect() as conn:
            heads = await conn.run_sync(current_heads)
            tables = await conn.run_sync(lambda sync: set(inspect(sync).get_table_names()))
    finally:
        for engine in engines:
            await engine.dispose()
    assert heads == {HEAD_REVISION}
    assert tables == set(Base.metadata.tables) | {"alembic_version"}
