"""A flood of frames: at most MAX_EVENTS_IN_FLIGHT events are handled at once, the rest wait
as raw frames in arrival order, and API results never wait behind them."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import nonebot
import pytest
from nonebot.adapters.onebot.v11 import Event
from nonebug import App

from pallas.platform.onebot import adapter as adapter_module
from pallas.platform.onebot.adapter import MAX_EVENTS_IN_FLIGHT, PallasBot, PallasOneBotAdapter
from tests.support.fake_napcat import FakeNapCat


async def test_a_flood_waits_in_order_beyond_the_limit_and_results_pass_it(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = nonebot.get_adapter(PallasOneBotAdapter)
    napcat = FakeNapCat("ws://unused", 10000)
    release = asyncio.Event()
    began: list[int] = []
    results: list[dict[str, Any]] = []

    async def slow_handle(event: Event) -> None:
        began.append(int(getattr(event, "message_id", -1)))
        await release.wait()

    monkeypatch.setattr(
        adapter_module.PallasOneBotAdapter._result_store, "add_result", results.append
    )
    flood = MAX_EVENTS_IN_FLIGHT + 40
    async with app.test_api() as ctx:
        bot = ctx.create_bot(base=PallasBot, adapter=adapter, self_id="10000")
        monkeypatch.setattr(bot, "handle_event", slow_handle)
        for n in range(flood):
            frame = {"time": 1_764_500_000, "self_id": 10000, **napcat.group_message(700, 42, "刷")}
            adapter._dispatch_frame(bot, json.dumps({**frame, "message_id": 10_000 + n}))
            if n == MAX_EVENTS_IN_FLIGHT + 10:  # an API result amid the waiting events
                adapter._dispatch_frame(bot, json.dumps({"status": "ok", "echo": "42"}))
        await asyncio.sleep(0)
        assert len(adapter.tasks) == MAX_EVENTS_IN_FLIGHT
        assert len(adapter._waiting) == flood - MAX_EVENTS_IN_FLIGHT
        assert [r["echo"] for r in results] == ["42"]
        release.set()
        while adapter.tasks or adapter._waiting:
            await asyncio.sleep(0.01)
    assert began == [10_000 + n for n in range(flood)]
