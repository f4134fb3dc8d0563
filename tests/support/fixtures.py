"""Shared fixtures: the real bot in a child process, a fake NapCat, the bot's database."""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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
    admin_url = request.getfixturevalue("postgres_admin_url")
    admin = make_url(admin_url)
    name = await _new_database(admin_url, "pallas_test")
    return admin.set(database=name).render_as_string(hide_password=False)


async def _admin(admin_url: str) -> asyncpg.Connection:
    admin = make_url(admin_url)
    return await asyncpg.connect(
        host=admin.host,
        port=admin.port,
        user=admin.username,
        password=admin.password,
        database=admin.database or "postgres",
    )


def _apart(work: Coroutine[Any, Any, None]) -> None:
    """Run set-up work on a loop of its own (a session fixture asked for from inside a
    running test loop cannot use that loop)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, work).result()


async def _migrate(url: str) -> None:
    engine = create_engine(url)
    await upgrade_to_head(engine)
    await engine.dispose()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head once per session; each test gets a copy."""
    path = tmp_path_factory.mktemp("template") / "store.db"
    _apart(_migrate(f"sqlite+aiosqlite:///{path}"))
    return path


@pytest.fixture(scope="session")
def postgres_template(postgres_admin_url: str) -> str:
    """A PostgreSQL database migrated to head once per session, copied for each test
    (CREATE DATABASE ... TEMPLATE): the migrations run once, not once a test."""
    name = f"pallas_template_{os.getpid()}"

    async def create() -> None:
        conn = await _admin(postgres_admin_url)
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        url = make_url(postgres_admin_url).set(database=name)
        await _migrate(url.render_as_string(hide_password=False))

    _apart(create())
    return name


@pytest.fixture(params=BACKENDS)
async def migrated_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database already at the head revision, on each backend (a copy of a template
    migrated once per session)."""
    if request.param == "postgresql" and not postgres_configured():
        pytest.skip("no PostgreSQL: install its server binaries or set PALLAS_TEST_POSTGRES_URL")
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        target = tmp_path / "store.db"
        shutil.copyfile(template, target)
        return f"sqlite+aiosqlite:///{target}"
    admin_url = request.getfixturevalue("postgres_admin_url")
    template_name = request.getfixturevalue("postgres_template")
    name = await _new_database(admin_url, "pallas_test", template_name)
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


async def _new_database(admin_url: str, prefix: str, template: str | None = None) -> str:
    """A fresh database on the test server (a copy of `template`, if given); its name."""
    name = f"{prefix}_{os.getpid()}_{next(_databases)}"
    conn = await _admin(admin_url)
    try:
        copy = f' TEMPLATE "{template}"' if template else ""
        await conn.execute(f'CREATE DATABASE "{name}"{copy}')
    finally:
        await conn.close()
    return name


@pytest.fixture
async def engine(migrated_url: str) -> AsyncIterator[AsyncEngine]:
    """A migrated engine on a fresh database."""
    engine = create_engine(migrated_url)
    await upgrade_to_head(engine)  # already there: checks the revision, runs nothing
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


@pytest.fixture
async def postgres_url(request: pytest.FixtureRequest) -> str:
    """An empty PostgreSQL database for bot processes to share; like every PostgreSQL store
    test, a visible skip with its reason where no server can run (CI installs one)."""
    if not postgres_configured():
        pytest.skip("no PostgreSQL: install its server binaries or set PALLAS_TEST_POSTGRES_URL")
    admin_url = request.getfixturevalue("postgres_admin_url")
    name = await _new_database(admin_url, "pallas_e2e")
    url = make_url(admin_url).set(drivername="postgresql+asyncpg", database=name)
    return url.render_as_string(hide_password=False)
