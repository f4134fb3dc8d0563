"""The manager writes each call to the call log; the main log gets one summary line."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from random import Random

import pytest
from loguru import logger

from pallas.providers.call_log import CallLog
from pallas.providers.catalog import ModelType
from pallas.providers.errors import AllCandidatesFailedError
from pallas.providers.manager import ManagerDeps, ModelManager
from pallas.providers.openai_wire import ChatRequest
from pallas.providers.results import CallTag, Purpose
from tests.providers.support import FakeClock, catalog, model
from tests.support.fake_llm import FakeModelServer, Reply, Status, ToolCallSpec

SECRET = "只在调用日志里出现的内容"
IMAGE = "data:image/png;base64," + "iVBORw0KGgo" * 5_000


async def test_calls_and_failures_go_to_the_call_log_not_the_main_log(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    log = CallLog(tmp_path / "logs" / "llm", started_at=datetime(2026, 11, 30, 18, 0, tzinfo=UTC))
    path = log.open()
    clock = FakeClock()
    manager = ModelManager(
        catalog(model_server, [model("a"), model("b")], preferred=((ModelType.CHAT, "a"),)),
        ManagerDeps(call_log=log, monotonic=clock, rng=Random(1), sleep=clock.sleep),
    )
    main_log: list[str] = []
    sink = logger.add(main_log.append, format="{message}")
    model_server.script("up-a", Status(500, "upstream exploded"))
    model_server.script("up-b", Reply("答复" + SECRET, (ToolCallSpec("reply", '{"text":"hi"}'),)))
    request = ChatRequest(
        [
            {"role": "system", "content": "你是群友"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": SECRET},
                    {"type": "image_url", "image_url": {"url": IMAGE}},
                ],
            },
        ]
    )
    try:
        result = await manager.chat(request, tag=CallTag(Purpose.DECISION, stream_key="group:7"))
        await manager.close()
    finally:
        logger.remove(sink)
    log.close()

    assert result.model == "b"
    assert path.name == "llm-20261130-180000.log"
    text = path.read_text(encoding="utf-8")
    assert text.count(SECRET) == 3  # the input of both attempts, the output once
    assert "upstream exploded" in text and "server_error" in text
    assert "group:7" in text and "decision" in text
    assert "iVBORw0KGgo" not in text and f"{len(IMAGE)} chars" in text
    assert len(main_log) == 2
    assert all(SECRET not in line and "iVBOR" not in line for line in main_log)
    assert "b purpose=decision outcome=ok" in main_log[1]


async def test_a_failed_embedding_is_logged_with_its_cause(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    log = CallLog(tmp_path, started_at=datetime(2026, 11, 30, 18, 0, tzinfo=UTC))
    path = log.open()
    manager = ModelManager(
        catalog(model_server, [model("v", ModelType.EMBEDDING)]), ManagerDeps(call_log=log)
    )
    model_server.script("up-v", Status(502, "bad gateway today"))
    with pytest.raises(AllCandidatesFailedError):
        await manager.embed(["要向量化的句子"], tag=CallTag(Purpose.EMBEDDING))
    await manager.close()
    log.close()
    text = path.read_text(encoding="utf-8")
    assert "要向量化的句子" in text and "bad gateway today" in text
