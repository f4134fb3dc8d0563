"""The quote rule as the handler applies it, through whole turns (the pure rule is in
test_context.py): code decides quotes, and a reply with no target answers its batch."""

from __future__ import annotations

import json

from pallas.app import Runtime
from tests.product.llm.agent.harness import CHAT_MODEL, RecordingOutlet, say, settle
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.inbound import BOT_ID, group, message
from tests.support.waiting import until

MODEL = CHAT_MODEL


def reply(delay_s: float = 0.0, **arguments: object) -> Reply:
    call = ToolCallSpec("reply", json.dumps(arguments, ensure_ascii=False))
    return Reply("", (call,), delay_s=delay_s)


async def test_a_reply_without_a_target_quotes_the_call_when_others_spoke_since(
    runtime: Runtime, model_server: FakeModelServer, outlet: RecordingOutlet
) -> None:
    stream = group("q1")
    model_server.script(MODEL, reply(delay_s=0.6, text="在的"))  # the model names no target
    asked = message("@牛牛 在吗", stream=stream, mentions=(BOT_ID,), platform_message_id="q1-at")
    await say(runtime, asked)
    await until(lambda: model_server.requests_for(MODEL))  # deciding; two others speak now
    await say(runtime, message("我先说", stream=stream, user_id="7"))
    await say(runtime, message("我也说", stream=stream, user_id="8"))
    await settle(runtime)
    first = outlet.sent[0]
    assert (first.text, first.quote) == ("在的", "q1-at")


async def test_a_reply_right_under_its_call_is_not_quoted(
    runtime: Runtime, model_server: FakeModelServer, outlet: RecordingOutlet
) -> None:
    model_server.script(MODEL, reply(text="在的"))
    await say(runtime, message("@牛牛 在吗", stream=group("q2"), mentions=(BOT_ID,)))
    await settle(runtime)
    assert [(s.text, s.quote) for s in outlet.sent] == [("在的", None)]
