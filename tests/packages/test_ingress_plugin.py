"""The ingress plugin inside NoneBot (nonebug): persist first, stop duplicates."""

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


async def test_hook_is_registered_persists_first_and_stops_duplicates(
    app: App, runtime: Runtime
) -> None:
    adapter = nonebot.get_adapter(PallasOneBotAdapter)
    persist_inbound = adapter.inbound_hook
    assert persist_inbound is not None and persist_inbound.__module__ == "packages.ingress"
    napcat = FakeNapCat("ws://unused", 10000)
    data = {"time": 1_764_500_000, "self_id": 10000, **napcat.group_message(600, 42, "你好")}
    db = TimelineDb(runtime.settings.pallas_data_dir / "pallas.db")
    async with app.test_matcher(later_handler) as ctx:
        bot = ctx.create_bot(base=PallasBot, adapter=adapter, self_id="10000")
        for _ in range(2):  # the second delivery is a duplicate
            event = GroupMessageEvent.model_validate(data)
            # What PallasBot.handle_event does: the hook first, NoneBot's dispatch if it passes.
            if await persist_inbound(bot, event):
                assert len(db.messages(data["message_id"])) == 1, "committed before dispatch"
                ctx.receive_event(bot, event)
    assert handled == [data["message_id"]]
    rows = db.messages(data["message_id"])
    assert len(rows) == 1 and rows[0]["text"] == "你好"
    assert len(db.events("inbound_duplicate")) == 1


async def test_unreadable_events_stop_at_the_hook(app: App, runtime: Runtime) -> None:
    adapter = nonebot.get_adapter(PallasOneBotAdapter)
    persist_inbound = adapter.inbound_hook
    assert persist_inbound is not None
    async with app.test_api() as ctx:
        bot = ctx.create_bot(base=PallasBot, adapter=adapter, self_id="10000")
        broken = PallasOneBotAdapter.json_to_event(
            {"time": 1, "self_id": 10000, "post_type": "message", "message_type": "group"}
        )
        heartbeat = PallasOneBotAdapter.json_to_event(
            {
                "time": 1,
                "self_id": 10000,
                "post_type": "meta_event",
                "meta_event_type": "heartbeat",
                "status": {},
                "interval": 5000,
            }
        )
        assert broken is not None and heartbeat is not None
        assert await persist_inbound(bot, broken) is False
        assert await persist_inbound(bot, heartbeat) is True
