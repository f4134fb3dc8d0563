"""Calls through the manager against a real HTTP server: shapes, streams, usage, cost."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from pallas.providers.budget import BudgetLimits, DailyBudget, Shares
from pallas.providers.catalog import ModelType, Pricing
from pallas.providers.errors import NoModelError
from pallas.providers.openai_wire import ChatRequest
from pallas.providers.results import CallTag, Purpose
from tests.providers.support import HELLO, catalog, harness, model
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec, Usage

TAG = CallTag(Purpose.DECISION, stream_id=None, turn_id=42, stream_key="group:1")
PRICED = Pricing(input=2.0, output=8.0, cache_hit=0.5)

REPLY_TOOL = {
    "type": "function",
    "function": {
        "name": "reply",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
}


async def test_a_plain_completion_reports_text_usage_cost_and_model(
    model_server: FakeModelServer,
) -> None:
    h = harness(catalog(model_server, [model("a", pricing=PRICED)]))
    model_server.script("up-a", Reply("在呢", usage=Usage(1200, 300, 800)))
    result = await h.manager.chat(HELLO, tag=TAG)
    assert result.text == "在呢"
    assert (result.model, result.upstream_model, result.attempts) == ("a", "up-a", 1)
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (1200, 300)
    assert result.usage.cached_tokens == 800 and not result.usage.estimated
    assert result.cost == pytest.approx((400 * 2 + 800 * 0.5 + 300 * 8) / 1e6)
    [request] = model_server.requests
    assert request.body["messages"] == [{"role": "user", "content": "你好"}]
    assert request.headers["x-test"] == "yes" and request.api_key == "sk-1"
    assert "stream" not in request.body or request.body["stream"] is False
    [row] = h.rows
    assert (row.purpose, row.model, row.model_type, row.outcome) == ("decision", "a", "chat", "ok")
    assert (row.prompt_tokens, row.completion_tokens, row.cached_tokens) == (1200, 300, 800)
    assert row.cost == pytest.approx(result.cost)
    assert (row.turn_id, row.provider, row.attempt) == (42, "p", 1)
    await h.manager.close()


async def test_model_defaults_apply_unless_the_call_overrides_them(
    model_server: FakeModelServer,
) -> None:
    spec = model("a")
    spec = type(spec)(**{**spec.__dict__, "temperature": 0.3, "max_tokens": 64})
    h = harness(catalog(model_server, [spec]))
    await h.manager.chat(HELLO, tag=TAG)
    await h.manager.chat(ChatRequest(HELLO.messages, temperature=1.1), tag=TAG)
    first, second = (r.body for r in model_server.requests)
    assert (first["temperature"], first["max_tokens"]) == (0.3, 64)
    assert (second["temperature"], second["max_tokens"]) == (1.1, 64)
    await h.manager.close()


async def test_a_stream_reassembles_text_and_tool_call_fragments_by_index(
    model_server: FakeModelServer,
) -> None:
    h = harness(catalog(model_server, [model("a", pricing=PRICED)]))
    calls = (
        ToolCallSpec("reply", json.dumps({"text": "好的，马上来", "target_message_id": 17})),
        ToolCallSpec("memory_search", '{"query": "上周的约定"}'),
    )
    model_server.script("up-a", Reply("想一想", calls, Usage(50, 20, 10), chunk_chars=2))
    request = ChatRequest(HELLO.messages, tools=[REPLY_TOOL], tool_choice="required")
    result = await h.manager.chat(request, tag=TAG, stream=True)
    assert result.text == "想一想"
    assert [c.name for c in result.tool_calls] == ["reply", "memory_search"]
    assert result.tool_calls[0].arguments == {"text": "好的，马上来", "target_message_id": 17}
    assert result.tool_calls[1].arguments == {"query": "上周的约定"}
    assert result.finish_reason == "tool_calls"
    assert (result.usage.prompt_tokens, result.usage.cached_tokens) == (50, 10)
    body = model_server.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["tools"] == [REPLY_TOOL] and body["tool_choice"] == "required"
    await h.manager.close()


async def test_a_model_configured_to_stream_streams_by_default(
    model_server: FakeModelServer,
) -> None:
    h = harness(catalog(model_server, [model("a", stream=True)]))
    assert (await h.manager.chat(HELLO, tag=TAG)).text == "ok"
    assert model_server.requests[0].body["stream"] is True
    await h.manager.close()


async def test_a_service_that_ignores_stream_options_gets_estimated_usage(
    model_server: FakeModelServer,
) -> None:
    h = harness(catalog(model_server, [model("a", pricing=PRICED)]))
    model_server.script("up-a", Reply("hello there, friend", usage_in_stream=False))
    result = await h.manager.chat(HELLO, tag=TAG, stream=True)
    assert result.usage.estimated
    assert result.usage.prompt_tokens == 2  # "你好": two CJK characters
    assert result.usage.completion_tokens == 5  # 19 ASCII characters
    assert result.cost == pytest.approx((2 * 2 + 5 * 8) / 1e6)
    assert h.rows[0].usage_estimated
    await h.manager.close()


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_arguments_that_are_not_json_are_kept_and_explained(
    model_server: FakeModelServer, stream: bool
) -> None:
    h = harness(catalog(model_server, [model("a")]))
    model_server.script("up-a", Reply("", (ToolCallSpec("reply", '{"text": "半截'),)))
    request = ChatRequest(HELLO.messages, tools=[REPLY_TOOL])
    result = await h.manager.chat(request, tag=TAG, stream=stream)
    [call] = result.tool_calls
    assert call.arguments is None
    assert call.raw_arguments == '{"text": "半截'
    assert "not JSON" in call.arguments_error
    model_server.script("up-a", Reply("", (ToolCallSpec("reply", "[1, 2]"),)))
    [call] = (await h.manager.chat(request, tag=TAG, stream=stream)).tool_calls
    assert call.arguments is None and "not a JSON object" in call.arguments_error
    await h.manager.close()


async def test_embeddings_come_back_in_input_order_with_usage(
    model_server: FakeModelServer,
) -> None:
    spec = model("vec", ModelType.EMBEDDING, pricing=Pricing(input=0.5))
    h = harness(catalog(model_server, [spec]))
    result = await h.manager.embed(["第一句", "second one"], tag=CallTag(Purpose.EMBEDDING))
    assert len(result.vectors) == 2 and len(result.vectors[0]) == 8
    assert result.vectors[0] != result.vectors[1]
    assert result.model == "vec"
    again = await h.manager.embed(["second one"], tag=CallTag(Purpose.EMBEDDING))
    assert again.vectors[0] == pytest.approx(result.vectors[1])
    assert result.usage.prompt_tokens > 0
    assert result.cost == pytest.approx(result.usage.prompt_tokens * 0.5 / 1e6)
    assert [r.purpose for r in h.rows] == ["embedding", "embedding"]
    assert h.rows[0].model_type == "embedding"
    await h.manager.close()


async def test_no_model_for_a_type_is_a_clear_error(model_server: FakeModelServer) -> None:
    h = harness(catalog(model_server, [model("a")]))
    with pytest.raises(NoModelError, match="no model registered for type vision"):
        await h.manager.chat(HELLO, tag=TAG, model_type=ModelType.VISION)
    with pytest.raises(NoModelError, match="embedding"):
        await h.manager.embed(["x"], tag=CallTag(Purpose.EMBEDDING))
    with pytest.raises(NoModelError, match="'nope'"):
        await h.manager.chat(HELLO, tag=TAG, model="nope")
    assert model_server.requests == []


async def test_tool_calls_only_go_to_models_that_support_them(
    model_server: FakeModelServer,
) -> None:
    plain = model("plain", tool_calling=False)
    h = harness(catalog(model_server, [plain, model("tools")]))
    assert h.manager.supports_tools(ModelType.CHAT)
    for _ in range(6):
        result = await h.manager.chat(ChatRequest(HELLO.messages, tools=[REPLY_TOOL]), tag=TAG)
        assert result.model == "tools"
    only_plain = harness(catalog(model_server, [plain]))
    assert not only_plain.manager.supports_tools(ModelType.CHAT)
    with pytest.raises(NoModelError, match="native tool calling"):
        await only_plain.manager.chat(ChatRequest(HELLO.messages, tools=[REPLY_TOOL]), tag=TAG)
    await h.manager.close()


async def test_near_the_cap_the_cheaper_model_answers_first_over_real_http(
    model_server: FakeModelServer,
) -> None:
    chosen = ((ModelType.CHAT, "big"),)  # the owner's choice, until the cap nears
    h = harness(catalog(model_server, [model("big"), model("mini")], preferred=chosen))
    budget = DailyBudget(BudgetLimits(tokens=1000), lambda: datetime(2026, 12, 5, 4, tzinfo=UTC))
    budget.shares = lambda: Shares(cheaper_model="mini", cheaper_from=0.5)
    h.manager._deps.budget = budget
    model_server.script("up-big", Reply("大", usage=Usage(300, 300)))
    model_server.script("up-mini", Reply("小", usage=Usage(10, 10)))
    first = await h.manager.chat(HELLO, tag=TAG)
    assert first.model == "big"  # 600 of 1000 spent: past half
    second = await h.manager.chat(HELLO, tag=TAG)
    assert second.model == "mini"
    named = await h.manager.chat(HELLO, tag=TAG, model="big")  # a call naming its model keeps it
    assert named.model == "big"
    await h.manager.close()
