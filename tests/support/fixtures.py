"""Shared fixtures: the real bot in a child process, a fake NapCat, the bot's database."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.engine import create_engine
from pallas.store.ledger import LedgerWriter
from pallas.store.migrate import upgrade_to_head
from pallas.store.timeline import TimelineWriter
from tests.support.bot_process import BotProcess
from tests.support.fake_llm import FakeModelServer
from tests.support.fake_napcat import FakeNapCat
from tests.support.postgres import PostgresServer, postgres_configured
from tests.support.timeline_db import TimelineDb

ACCESS_TOKEN = "test-token"
_self_ids = itertools.count(20_001)
_databases = itertools.count(1)
BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session")
async def running_bot(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BotProcess]:
    """One real bot for the session; each test uses its own bot account id, so its own streams."""
    bot = BotProcess(tmp_path_factory.mktemp("bot"), token=ACCESS_TOKEN)
    bot.start()
    try:
        await bot.wait_ready()
        yield bot
    finally:
        bot.stop()


@pytest.fixture
async def napcat(running_bot: BotProcess) -> AsyncIterator[FakeNapCat]:
    client = FakeNapCat(running_bot.ws_url, next(_self_ids), ACCESS_TOKEN)
    await client.connect()
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def timeline(running_bot: BotProcess) -> TimelineDb:
    return TimelineDb(running_bot.db_path)


@pytest.fixture
def fresh_bot_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


@pytest.fixture(scope="session")
def postgres_admin_url() -> Iterator[str]:
    configured = os.environ.get("PALLAS_TEST_POSTGRES_URL")
    if configured:
        yield configured
        return
    server = PostgresServer().start()
    try:
        yield server.admin_url
    finally:
        server.stop()


@pytest.fixture(params=BACKENDS)
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database on each backend; PostgreSQL is a visible skip, with its
    reason, on a machine that can run no server (no binaries, no PALLAS_TEST_POSTGRES_URL)."""
    if request.param == "postgresql" and not postgres_configured():
        pytest.skip("no PostgreSQL: install its server binaries or set PALLAS_TEST_POSTGRES_URL")
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    admin = make_url(request.getfixturevalue("postgres_admin_url"))
    name = f"pallas_test_{os.getpid()}_{next(_databases)}"
    conn = await asyncpg.connect(
        host=admin.host,
        port=admin.port,
        user=admin.username,
        password=admin.password,
        database=admin.database or "postgres",
    )
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return admin.set(database=name).render_as_string(hide_password=False)


@pytest.fixture
async def engine(store_url: str) -> AsyncIterator[AsyncEngine]:
    """A migrated engine on a fresh database."""
    engine = create_engine(store_url)
    await upgrade_to_head(engine)
    yield engine
    await engine.dispose()


@pytest.fixture
async def writer(engine: AsyncEngine) -> AsyncIterator[TimelineWriter]:
    """The real timeline writer, started, on the migrated `engine`."""
    writer = TimelineWriter(engine)
    writer.start()
    yield writer
    await writer.close()


@pytest.fixture
async def ledger(engine: AsyncEngine) -> AsyncIterator[LedgerWriter]:
    """The real audit ledger writer, started, on the migrated `engine`."""
    ledger = LedgerWriter(engine)
    ledger.start()
    yield ledger
    await ledger.close()


@pytest.fixture
async def model_server() -> AsyncIterator[FakeModelServer]:
    """A fake OpenAI-compatible service on a real loopback port."""
    async with FakeModelServer() as server:
        yield server
