"""The agent on different model set-ups: text protocol, split mode, timeouts, budgets."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from pallas.app import Runtime, utc_now
from pallas.product.llm.agent.config import AgentConfig
from tests.product.llm.agent.harness import RecordingOutlet, ledger, say, settle, start_agent
from tests.support.fake_llm import FakeModelServer, Reply, Stall, ToolCallSpec
from tests.support.inbound import BOT_ID, group, message, private


def providers(tmp_path: Path, server: FakeModelServer, models: str, timeout: float = 10) -> Path:
    path = tmp_path / "providers.yml"
    path.write_text(
        f"providers:\n  - name: fake\n    base_url: {server.base_url}\n"
        f"    timeout: {timeout}\n    models:\n{models}",
        encoding="utf-8",
    )
    return path


@asynccontextmanager
async def agent_on(
    tmp_path: Path,
    store_url: str,
    server: FakeModelServer,
    models: str,
    *,
    timeout: float = 10,
    config: AgentConfig | None = None,
) -> AsyncIterator[tuple[Runtime, RecordingOutlet]]:
    """The kernel and the agent on the given models; stopped on leaving."""
    file = providers(tmp_path, server, models, timeout)
    outlet = RecordingOutlet()
    runtime = await start_agent(
        tmp_path, store_url, outlet=outlet, config=config, pallas_providers_file=file
    )
    try:
        yield runtime, outlet
    finally:
        await runtime.stop()


PLAIN = "      - {model: plain, types: [chat], tool_calling: false}\n"


async def test_a_model_without_tool_calling_uses_the_text_protocol(
    tmp_path: Path, store_url: str, model_server: FakeModelServer
) -> None:
    async with agent_on(tmp_path, store_url, model_server, PLAIN) as (runtime, outlet):
        model_server.script(
            "plain",
            Reply("嗯……我想想。\n```\nreply(text=“行，\n晚上见”)\n```"),
        )
        await say(runtime, message("今晚吃饭吗", stream=private("90")))
        await settle(runtime)
    [request] = model_server.requests_for("plain")
    assert "tools" not in request.body
    system = request.body["messages"][0]["content"]
    assert "reply(" in system and "代码块" in system
    assert [s.text for s in outlet.sent] == ["行，", "晚上见"]


async def test_text_protocol_problems_are_fed_back_as_readable_hints(
    tmp_path: Path, store_url: str, model_server: FakeModelServer
) -> None:
    async with agent_on(tmp_path, store_url, model_server, PLAIN) as (runtime, outlet):
        model_server.script(
            "plain",
            Reply("```\nreply(target_message_id=1)\n```"),
            Reply('```\nreply(text="好")\n```'),
        )
        await say(runtime, message("在吗", stream=private("91")))
        await settle(runtime)
    second = model_server.requests_for("plain")[1].body["messages"]
    assert second[-1]["role"] == "user" and "缺少必填参数 text" in second[-1]["content"]
    assert [s.text for s in outlet.sent] == ["好"]


async def test_split_mode_decides_with_the_planner_and_writes_with_the_chat_model(
    tmp_path: Path, store_url: str, model_server: FakeModelServer
) -> None:
    models = (
        "      - {model: planner, types: [tool]}\n"
        "      - {model: writer, types: [chat], tool_calling: false}\n"
    )
    config = AgentConfig(split_reply=True)
    async with agent_on(tmp_path, store_url, model_server, models, config=config) as (
        runtime,
        outlet,
    ):
        plan = json.dumps({"text": "答应他，说晚上有空"}, ensure_ascii=False)
        model_server.script("planner", Reply("", (ToolCallSpec("reply", plan),)))
        model_server.script("writer", Reply("有空有空\n几点？"))
        await say(runtime, message("@牛牛 晚上有空吗", stream=group("s1"), mentions=(BOT_ID,)))
        await settle(runtime)
    [decision] = model_server.requests_for("planner")
    [writing] = model_server.requests_for("writer")
    assert "说话风格" not in decision.body["messages"][0]["content"]  # decision-only render
    assert "tools" in decision.body and "tools" not in writing.body
    assert "说话风格" in writing.body["messages"][0]["content"]
    assert "答应他" in writing.body["messages"][-1]["content"]
    assert [s.text for s in outlet.sent] == ["有空有空", "几点？"]
    decided = (await ledger(runtime.engine, "agent_decided"))[0]
    assert decided.payload["models"] == ["fake/planner", "fake/writer"]


async def test_split_mode_without_a_planner_keeps_the_single_call(
    tmp_path: Path, store_url: str, model_server: FakeModelServer
) -> None:
    solo = "      - {model: solo, types: [chat]}\n"
    config = AgentConfig(split_reply=True)
    async with agent_on(tmp_path, store_url, model_server, solo, config=config) as (
        runtime,
        outlet,
    ):
        model_server.script("solo", Reply("", (ToolCallSpec("reply", '{"text": "好"}'),)))
        await say(runtime, message("在吗", stream=private("92")))
        await settle(runtime)
    assert len(model_server.requests_for("solo")) == 1
    assert [s.text for s in outlet.sent] == ["好"]


async def test_a_model_that_never_answers_ends_the_turn_with_timeout(
    tmp_path: Path, store_url: str, model_server: FakeModelServer
) -> None:
    slow = "      - {model: slow, types: [chat]}\n"
    async with agent_on(tmp_path, store_url, model_server, slow, timeout=0.5) as (
        runtime,
        outlet,
    ):
        model_server.script("slow", Stall())
        await say(runtime, message("在吗", stream=private("93")))
        await settle(runtime)
    [failed] = await ledger(runtime.engine, "agent_failed")
    assert failed.reason == "timeout"
    assert outlet.sent == []


async def test_the_token_budget_drops_old_history_but_keeps_the_batch(
    tmp_path: Path, store_url: str, model_server: FakeModelServer
) -> None:
    config = AgentConfig(context_token_budget=200)
    one = "      - {model: m, types: [chat]}\n"
    async with agent_on(tmp_path, store_url, model_server, one, config=config) as (runtime, _):
        stream = group("b1")
        for i in range(8):
            await say(runtime, message(f"很长的一段闲聊{i}" + "啊" * 60, stream=stream))
        await settle(runtime)
        model_server.reset()
        model_server.script("m", Reply("", (ToolCallSpec("reply", '{"text": "嗯"}'),)))
        batch = "@牛牛 " + "问题" * 100
        mid = await say(runtime, message(batch, stream=stream, mentions=(BOT_ID,)))
        await settle(runtime)
    [request] = model_server.requests_for("m")
    user = request.body["messages"][-1]["content"]
    assert f'"id": {mid}' in user and "问题问题" in user
    assert "更早的" in user and "条略去" in user
    assembled = (await ledger(runtime.engine, "context_assembled"))[-1]
    assert assembled.payload["dropped_lines"] > 0


async def test_split_mode_switched_on_while_running_splits_the_next_turn(
    tmp_path: Path, store_url: str, model_server: FakeModelServer
) -> None:
    models = (
        "      - {model: planner, types: [tool]}\n"
        "      - {model: writer, types: [chat]}\n"
    )
    async with agent_on(tmp_path, store_url, model_server, models) as (runtime, outlet):
        model_server.script("writer", Reply("", (ToolCallSpec("reply", '{"text": "一步"}'),)))
        await say(runtime, message("在吗", stream=private("93")))
        await settle(runtime)
        assert model_server.requests_for("planner") == []  # one call, as the agent file says
        split = {"split_reply": True}
        await runtime.settings_registry.update("agent", "global", split, utc_now())  # console
        plan = json.dumps({"text": "说两步"}, ensure_ascii=False)
        model_server.script("planner", Reply("", (ToolCallSpec("reply", plan),)))
        model_server.script("writer", Reply("两步"))
        await say(runtime, message("再说一次", stream=private("93")))
        await settle(runtime)
    assert len(model_server.requests_for("planner")) == 1
    assert [s.text for s in outlet.sent] == ["一步", "两步"]
