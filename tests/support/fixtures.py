"""Shared fixtures: the real bot in a child process, a fake NapCat, the bot's database."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.support.bot_process import BotProcess
from tests.support.fake_napcat import FakeNapCat
from tests.support.timeline_db import TimelineDb

ACCESS_TOKEN = "test-token"
_self_ids = itertools.count(20_001)


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
