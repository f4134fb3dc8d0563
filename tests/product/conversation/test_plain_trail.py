"""The audit trail in plain Chinese: every stable word has its words, and what the owner and
the member read holds no code of the trail (pallas/product/conversation/plain_trail.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import pytest

from pallas.core.actions import OutboxKind
from pallas.product.conversation.delivery.pacing import Recovery
from pallas.product.conversation.gate.gate import Reason, Signal
from pallas.product.conversation.gate.trigger import SpeakTrigger
from pallas.product.conversation.plain_trail import (
    FAILURE_WORDS,
    GATE_WORDS,
    KIND_WORDS,
    RECOVERY_WORDS,
    SIGNAL_WORDS,
    STATUS_WORDS,
    STEP_NAMES,
    TRIGGER_WORDS,
    TURN_WORDS,
    TurnCost,
    message_headline,
    stage_words,
    step_text,
    turn_headline,
)
from pallas.product.conversation.turns.turn import TurnDecision
from pallas.product.llm.agent.loop import FailureReason
from pallas.store.audit import EventKind
from pallas.store.audit_trail import MessagePath, OutboxState, TrailEvent, TurnTrace
from pallas.store.outbox import OutboxStatus

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
CODE = re.compile(r"[A-Za-z_]{3,}")  # an English word or a snake_case code


def event(kind: str, word: str = "", **payload: Any) -> TrailEvent:
    return TrailEvent(kind, word, T0, 3, 7, payload)


def row(status: str = "sent", origin: str = "agent_reply") -> OutboxState:
    return OutboxState(1, "message", status, 0, "9", "", origin)


@pytest.mark.parametrize(
    ("vocabulary", "words"),
    [
        (Reason, GATE_WORDS),
        (Signal, SIGNAL_WORDS),
        (FailureReason, FAILURE_WORDS),
        (TurnDecision, TURN_WORDS),
        (Recovery, RECOVERY_WORDS),
        (OutboxStatus, STATUS_WORDS),
        (OutboxKind, KIND_WORDS),
        (SpeakTrigger, TRIGGER_WORDS),
        (EventKind, STEP_NAMES),
    ],
)
def test_every_stable_word_has_chinese_words(
    vocabulary: type[StrEnum], words: dict[str, str]
) -> None:
    missing = {member.value for member in vocabulary} - set(words)
    assert missing == set()
    assert not any(CODE.search(text) for text in words.values())


def test_stage_words_name_the_command_and_why_it_was_not_run() -> None:
    assert stage_words("command_帮助") == "回答了命令 /帮助"
    assert stage_words("command_关闭_refused") == "命令 /关闭：没有权限"
    assert stage_words("command_关闭_refused_again").startswith("命令 /关闭：没有权限")
    assert stage_words("command_status_flood") == "命令 /status：用得太频繁，没有理"
    assert stage_words("repeated") == "跟着复读了"
    assert stage_words("something_new") == "其它原因"


def test_a_dropped_line_says_why_in_words() -> None:
    path = MessagePath(7, "今天吃什么", False, (event("gate_dropped", "attention_filtered"),), None)
    assert message_headline(path) == "没理：这句话没有叫我，群里也没在跟我说话。"


def test_an_answered_at_says_why_what_it_cost_and_what_arrived() -> None:
    turn = TurnTrace(3, (event("turn_started", "mentioned"), event("agent_decided", "reply")),
                     (row(), row()))  # fmt: skip
    passed = event("gate_passed", "mentioned", signals=["mentioned"])
    path = MessagePath(7, "@牛牛 在吗", False, (passed,), turn)
    priced = message_headline(path, TurnCost(1, 0.0003, priced=True))
    assert priced == "回了：被 @ 了；用了 1 次模型，花费 0.0003；2 条都送达了。"
    unpriced = message_headline(path, TurnCost(2, 0.0, priced=False))
    assert unpriced == "回了：被 @ 了；用了 2 次模型，未设价格；2 条都送达了。"


def test_a_silence_and_a_failure_say_their_reasons() -> None:
    silent = TurnTrace(3, (event("agent_decided", "silent", reason="在聊私事"),), ())
    assert turn_headline(silent) == "看过了，没接：在聊私事。"
    failed = TurnTrace(3, (event("agent_failed", "model_unavailable"),), ())
    assert turn_headline(failed) == "没回成：没有能用的聊天模型（看看模型设置）。"
    answered = TurnTrace(4, (event("stage_handled", "command_帮助"),), (row(origin="command"),))
    assert turn_headline(answered) == "命令回答：送达了。"


def test_steps_read_as_words_with_no_code() -> None:
    steps = [
        event("gate_passed", "attention", signals=["natural_window"]),
        event("context_assembled", "to_me"),
        event("tool_called", "ok", tool="web.search"),
        event("agent_decided", "silent", reason="不关我事"),
        event("delivered", "message"),
        event("turn_finished", "silent"),
        event("turn_failed", "ValueError"),
        event("sticker_missed", "开心"),
    ]
    lines = [step_text(step) for step in steps]
    assert lines[3] == "决定：不说话（不关我事）"
    assert lines[-1] == "想发表情包但没找到：开心"
    assert not any(CODE.search(line) for line in lines)


def test_a_wait_and_a_repeat_are_not_told_as_replies() -> None:
    waited = TurnTrace(3, (event("agent_decided", "wait"),), ())
    assert turn_headline(waited) == "先等等，看大家还说什么。"
    steps = (event("stage_acted", "repeated"), event("gate_dropped", "attention_filtered"))
    told = message_headline(MessagePath(7, "+1", False, steps, None))
    assert told == "没理（只是跟着复读了）：这句话没有叫我，群里也没在跟我说话。"
