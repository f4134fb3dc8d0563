"""The model sees a group the way a member does: its name, people by their cards, @ by name,
faces by name, owners and admins as such. NapCat-shaped frames go through the real boundary
into the real store; the prompt is read off the fake model server's recorded request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pallas.app import Runtime
from pallas.core.inbound import InboundMessage
from pallas.platform.onebot.adapter import read_event_frame
from pallas.platform.onebot.translate import translate_event
from tests.product.llm.agent.harness import RecordingOutlet, settle, start_agent
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.napcat_corpus import corpus_frame

MODEL = "m-chat"
BOT = "10000"


@pytest.fixture
async def runtime(
    tmp_path: Path, store_url: str, model_server: FakeModelServer
) -> AsyncIterator[Runtime]:
    runtime = await start_agent(
        tmp_path,
        store_url,
        outlet=RecordingOutlet(),
        llm_base_url=model_server.base_url,
        llm_model=MODEL,
        nickname=["帕拉斯"],
    )
    yield runtime
    await runtime.stop()


def frame_message(
    name: str, message_id: int, segments: list[dict[str, Any]] | None = None, **changes: Any
) -> InboundMessage:
    # A message of its own: its own QQ sequence number (the same one is the same message).
    frame = {**corpus_frame(name), "message_id": message_id, "real_seq": str(message_id),
             **changes}
    if segments is not None:
        frame["message"] = segments
    event = read_event_frame(json.dumps(frame, ensure_ascii=False), BOT, now_s=1_764_500_100)
    assert event is not None
    msg = translate_event(event).event
    assert isinstance(msg, InboundMessage)
    return msg


def user_prompt(model_server: FakeModelServer) -> str:
    (request, *_) = model_server.requests_for(MODEL)
    return "\n".join(str(m.get("content")) for m in request.body["messages"] if m["role"] == "user")


async def test_the_prompt_shows_the_group_name_cards_at_names_face_names_and_roles(
    runtime: Runtime, model_server: FakeModelServer
) -> None:
    model_server.script(MODEL, Reply("", (ToolCallSpec("reply", '{"text": "好"}'),)))
    # The admin (43, card "") speaks first, so the store knows them; then the owner is named
    # by a member profile, as a get_group_member_info answer would name them.
    admin_says = frame_message(
        "message_group_text",
        7_200_001,
        [{"type": "text", "data": {"text": "晚上开黑"}}],
        user_id=43,
        sender={"user_id": 43, "nickname": "小三", "card": "", "role": "admin"},
    )
    await runtime.conversation.ingress.accept(admin_says)
    face = corpus_frame("segment_face")["message"][0]
    at_me = frame_message(
        "message_group_text",
        7_200_002,
        [
            {"type": "at", "data": {"qq": BOT}},
            {"type": "text", "data": {"text": " 问问"}},
            {"type": "at", "data": {"qq": "43"}},
            {"type": "text", "data": {"text": " 去不去"}},
            face,
        ],
    )
    await runtime.conversation.ingress.accept(at_me)
    await settle(runtime)
    prompt = user_prompt(model_server)
    assert '"群名": "测试群"' in prompt
    assert '"发言人": "四号"' in prompt  # the sender's card, not the nickname 阿四
    assert "@帕拉斯 问问@小三 去不去" in prompt  # names, not 10000 / 43
    assert "@43" not in prompt and f"@{BOT}" not in prompt
    assert "[表情:吃瓜]" in prompt
    assert '"身份": "管理员"' in prompt
