"""Tools inside whole turns: discovery that lasts, rare functions through `call`, inventory."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pallas.app import Runtime, utc_now
from pallas.core.inbound import InboundMessage
from pallas.product.llm.tools.base import Visibility
from pallas.product.llm.tools.registry import FunctionPlugin
from tests.product.llm.agent.harness import RecordingOutlet, ledger, say, settle, start_agent
from tests.product.llm.tools.kit import EchoTool
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.inbound import message, private

MODEL = "m-tools"


def call(tool: str, **arguments: object) -> Reply:
    return Reply("", (ToolCallSpec(tool, json.dumps(arguments, ensure_ascii=False)),))


def offered(body: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools", [])}


@pytest.fixture
async def runtime(
    tmp_path: Path, store_url: str, model_server: FakeModelServer
) -> AsyncIterator[tuple[Runtime, RecordingOutlet, EchoTool]]:
    outlet = RecordingOutlet()
    runtime = await start_agent(
        tmp_path, store_url, outlet=outlet, llm_base_url=model_server.base_url, llm_model=MODEL
    )
    registry = runtime.tools.book.registry
    deferred = EchoTool("weather.lookup", visibility=Visibility.DEFERRED, hints=("天气预报",))
    registry.register(deferred)
    registry.register_plugin(
        FunctionPlugin(
            "dice", "掷骰子", common=(EchoTool("dice.roll"),), rare=(EchoTool("dice.loaded"),)
        )
    )
    yield runtime, outlet, deferred
    await runtime.stop()


async def test_a_tool_found_by_tools_find_is_used_and_stays_for_the_next_turn(
    runtime: tuple[Runtime, RecordingOutlet, EchoTool], model_server: FakeModelServer
) -> None:
    rt, outlet, deferred = runtime
    model_server.script(
        MODEL,
        call("tools__find", query="weather"),
        call("weather__lookup", word="晴"),
        call("reply", text="明天晴"),
    )
    await say(rt, message_in("明天会下雨吗", "501"))
    await settle(rt)
    first, second, third = (r.body for r in model_server.requests_for(MODEL))
    assert "tools__find" in offered(first) and "weather__lookup" not in offered(first)
    assert "weather__lookup" in offered(second)  # brought in by the find
    assert deferred.calls == [{"word": "晴"}]
    assert [s.text for s in outlet.sent] == ["明天晴"]
    found = json.loads(second["messages"][-1]["content"])
    assert found["结果"]["找到"][0]["功能"] == "weather.lookup"
    assert json.loads(third["messages"][-1]["content"])["结果"] == {"echo": "晴"}

    model_server.reset()
    model_server.script(MODEL, call("reply", text="还是晴"))
    await say(rt, message_in("那后天呢", "501"))
    await settle(rt)
    [next_turn] = model_server.requests_for(MODEL)
    assert "weather__lookup" in offered(next_turn.body)
    tools_used = await ledger(rt.engine, "tool_called")
    assert [e.payload["tool"] for e in tools_used] == ["tools.find", "weather.lookup"]
    assert len({e.turn_id for e in tools_used}) == 1


async def test_a_rare_plugin_function_is_reached_through_call(
    runtime: tuple[Runtime, RecordingOutlet, EchoTool], model_server: FakeModelServer
) -> None:
    rt, outlet, _ = runtime
    model_server.script(
        MODEL,
        call("dice__loaded", word="6"),  # a direct call is refused with a hint
        call("call", name="dice.loaded", arguments={"word": "6"}),
        call("reply", text="六点！"),
    )
    await say(rt, message_in("摇个骰子", "502"))
    await settle(rt)
    first, second, third = (r.body for r in model_server.requests_for(MODEL))
    assert "call" in offered(first) and "dice__loaded" not in offered(first)
    refusal = json.loads(second["messages"][-1]["content"])
    assert "请用 call" in refusal["结果"]["拒绝"]
    result = json.loads(third["messages"][-1]["content"])
    assert result["结果"] == {"echo": "6"}
    assert [s.text for s in outlet.sent] == ["六点！"]
    outcomes = [(e.payload["tool"], e.reason) for e in await ledger(rt.engine, "tool_called")]
    assert outcomes == [("dice.loaded", "refused"), ("dice.loaded", "ok")]


async def test_inventory_talk_offers_discovery_and_the_read_only_tools(
    runtime: tuple[Runtime, RecordingOutlet, EchoTool], model_server: FakeModelServer
) -> None:
    rt, _, _ = runtime
    model_server.script(MODEL, call("reply", text="能查天气、看时间、翻聊天记录"))
    await say(rt, message_in("你都会些什么", "503"))
    await settle(rt)
    [request] = model_server.requests_for(MODEL)
    tools = offered(request.body)
    assert {"tools__find", "time__now", "chat__history", "skills__list"} <= tools
    assert "tools__find" in request.body["messages"][0]["content"]


def message_in(text: str, user: str) -> InboundMessage:
    return message(text, stream=private(user), user_id=user)


async def test_limits_changed_while_running_bound_the_next_decision(
    runtime: tuple[Runtime, RecordingOutlet, EchoTool], model_server: FakeModelServer
) -> None:
    rt, outlet, _ = runtime
    limits = {"max_rounds": 2, "tool_call_budget": 8}
    await rt.settings_registry.update("agent", "global", limits, utc_now())  # as the console
    roll = call("dice__roll", word="六")
    model_server.script(MODEL, roll, roll, roll, call("reply", text="掷完了"))
    await say(rt, message_in("帮我掷三次骰子", "502"))
    await settle(rt)
    assert len(model_server.requests_for(MODEL)) == 2  # not the agent file's five
    assert "掷完了" not in [s.text for s in outlet.sent]
