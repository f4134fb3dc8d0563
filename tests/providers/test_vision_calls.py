"""Chat with pictures (OpenAI's multimodal message format) through a vision model."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pallas.providers.call_log import CallLog
from pallas.providers.catalog import ModelType, Pricing
from pallas.providers.estimate import IMAGE_TOKENS, estimate_tokens, message_tokens
from pallas.providers.manager import ManagerDeps, ModelManager
from pallas.providers.openai_wire import ChatRequest
from pallas.providers.results import CallTag, Purpose
from pallas.store.llm_usage import LlmCallRow
from tests.providers.support import catalog, harness, model
from tests.support.fake_llm import FakeModelServer, Reply
from tests.support.pictures import picture

LOOK = CallTag(Purpose.VISION, turn_id=3, stream_key="group:2")
QUESTION = "这张图里是什么？"
PNG_URL = "data:image/png;base64," + base64.b64encode(picture("orange", (32, 24))).decode()


def image_part(url: str = PNG_URL) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def looking_at(*urls: str) -> ChatRequest:
    content = [{"type": "text", "text": QUESTION}, *(image_part(url) for url in urls)]
    return ChatRequest([{"role": "user", "content": content}])


async def test_a_picture_reaches_the_vision_model_and_the_answer_comes_back(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    log = CallLog(tmp_path, started_at=datetime(2026, 12, 1, 9, 0, tzinfo=UTC))
    path = log.open()
    rows: list[LlmCallRow] = []
    specs = [model("talk"), model("eye", ModelType.VISION)]
    manager = ModelManager(catalog(model_server, specs), ManagerDeps(rows.append, log))
    model_server.script("up-eye", Reply("一只橘猫"))
    result = await manager.chat(looking_at(PNG_URL), tag=LOOK, model_type=ModelType.VISION)
    await manager.close()
    log.close()

    assert (result.text, result.model) == ("一只橘猫", "eye")
    [request] = model_server.requests
    assert request.model == "up-eye"
    [message] = request.body["messages"]
    assert message["content"] == [{"type": "text", "text": QUESTION}, image_part()]
    [row] = rows
    assert (row.model_type, row.purpose, row.outcome) == ("vision", "vision", "ok")
    text = path.read_text(encoding="utf-8")
    # The picture is logged by size only, never its base64.
    assert QUESTION in text and f"[image_url: data URL, {len(PNG_URL)} chars]" in text
    assert PNG_URL[30:60] not in text


async def test_a_service_without_usage_is_charged_for_each_picture(
    model_server: FakeModelServer,
) -> None:
    spec = model("eye", ModelType.VISION, pricing=Pricing(input=1.0, output=2.0))
    h = harness(catalog(model_server, [spec]))
    model_server.script("up-eye", Reply("两张图", usage_in_stream=False))
    request = looking_at(PNG_URL, "https://example.org/cat.jpg")
    result = await h.manager.chat(request, tag=LOOK, model_type=ModelType.VISION, stream=True)
    prompt = estimate_tokens(QUESTION) + 2 * IMAGE_TOKENS
    assert result.usage.estimated
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (prompt, 3)
    assert result.cost == pytest.approx((prompt * 1.0 + 3 * 2.0) / 1e6)
    assert h.rows[0].usage_estimated and h.rows[0].prompt_tokens == prompt
    await h.manager.close()


def test_the_estimate_counts_text_and_pictures_and_tolerates_odd_content() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "abcd"},
        {"role": "user", "content": [image_part(), {"type": "text", "text": "efgh"}]},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "user", "content": [image_part(), "stray", {"type": "input_audio"}]},
    ]
    assert message_tokens(messages) == estimate_tokens("abcd\nefgh") + 2 * IMAGE_TOKENS
    assert message_tokens(iter(messages)) == message_tokens(messages)  # read once is enough
    assert message_tokens([]) == 0
