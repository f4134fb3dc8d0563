"""The ingress preprocessor inside NoneBot (nonebug): persist first, stop duplicates."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import nonebot
import pytest
from nonebot.adapters.onebot.v11 import GroupMessageEvent, MessageEvent
from nonebug import App

from packages._runtime import install_runtime
from pallas.app import Runtime
from pallas.config import load_settings
from pallas.platform.onebot.adapter import PallasBot, PallasOneBotAdapter
from tests.support.fake_napcat import FakeNapCat
from tests.support.timeline_db import TimelineDb

handled: list[int] = []
later_handler = nonebot.on_message(priority=10, block=False)


@later_handler.handle()
async def _record(event: MessageEvent) -> None:
    handled.append(event.message_id)


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    runtime = Runtime.build(load_settings(env_file=None, pallas_data_dir=tmp_path))
    await runtime.start()
    install_runtime(runtime)
    yield runtime
    await runtime.stop()


async def test_message_is_committed_before_handlers_and_duplicates_stop(
    app: App, runtime: Runtime
) -> None:
    napcat = FakeNapCat("ws://unused", 10000)
    data = {"time": 1_764_500_000, "self_id": 10000, **napcat.group_message(600, 42, "你好")}
    event = GroupMessageEvent.model_validate(data)
    duplicate = GroupMessageEvent.model_validate(data)
    db = TimelineDb(runtime.settings.pallas_data_dir / "pallas.db")
    async with app.test_matcher(later_handler) as ctx:
        adapter = nonebot.get_adapter(PallasOneBotAdapter)
        bot = ctx.create_bot(base=PallasBot, adapter=adapter, self_id="10000")
        ctx.receive_event(bot, event)
        ctx.receive_event(bot, duplicate)
    assert handled == [data["message_id"]]
    rows = db.messages(data["message_id"])
    assert len(rows) == 1 and rows[0]["text"] == "你好"
    assert len(db.events("inbound_duplicate")) == 1
