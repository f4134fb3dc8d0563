"""`explain` and `trace` over real turns: the audit trail answers "why (not) a reply?"."""

from __future__ import annotations

import json

from pallas.app import Runtime
from pallas.store.audit_trail import explain
from tests.product.llm.agent.harness import CHAT_MODEL, RecordingOutlet, say, settle
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.inbound import BOT_ID, group, message


async def test_a_dropped_ambient_message_names_the_gate_rule(runtime: Runtime) -> None:
    message_id = await say(runtime, message("今天天气不错", stream=group("x1")))
    await settle(runtime)
    path = await explain(runtime.engine, message_id)
    assert path is not None and path.turn is None and not path.suppressed
    assert path.kinds() == ["inbound", "gate_dropped"]
    gate = path.events[-1]
    assert gate.reason == "attention_filtered" and gate.payload["stage"] == "ingress"


async def test_an_answered_mention_lists_the_turn_the_decision_and_the_delivered_rows(
    runtime: Runtime, model_server: FakeModelServer, outlet: RecordingOutlet
) -> None:
    arguments = json.dumps({"text": "在的"}, ensure_ascii=False)
    model_server.script(CHAT_MODEL, Reply("", (ToolCallSpec("reply", arguments),)))
    asked = message("@牛牛 在吗", stream=group("x2"), mentions=(BOT_ID,))
    message_id = await say(runtime, asked)
    await settle(runtime)
    path = await explain(runtime.engine, message_id)
    assert path is not None and path.turn is not None
    assert [e.kind for e in path.events] == ["inbound", "gate_passed"]
    assert path.events[-1].reason == "mentioned"
    kinds = path.turn.kinds()
    for kind in ("turn_started", "context_assembled", "agent_decided", "reply_queued"):
        assert kind in kinds
    assert kinds.index("agent_decided") < kinds.index("reply_queued") < kinds.index("delivered")
    decided = next(e for e in path.turn.events if e.kind == "agent_decided")
    assert decided.reason == "reply"
    [row] = path.turn.outbox
    assert (row.kind, row.status) == ("message", "sent")
    assert row.platform_message_id == outlet.sent[0].platform_message_id


async def test_an_unknown_message_has_no_path(runtime: Runtime) -> None:
    assert await explain(runtime.engine, 987_654) is None
