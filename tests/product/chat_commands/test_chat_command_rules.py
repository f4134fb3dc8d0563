"""The chat commands' own rules (pure): how long a mute is, why a message got no answer in
plain words, and that a command's text inside a quote is not a command."""

from __future__ import annotations

import pytest

from pallas.core.inbound import Segment, SegmentKind
from pallas.core.text import typed_text
from pallas.product.chat_commands.commands import DEFAULT_MUTE_MINUTES, FEATURES, mute_minutes
from pallas.product.chat_commands.plain import REASONS, recent_lines, why_not
from pallas.product.conversation.commands import Syntax, parse_command
from pallas.store.audit_trail import MessagePath, OutboxState, TrailEvent, TurnTrace
from tests.support.inbound import T0


@pytest.mark.parametrize(
    ("args", "minutes"),
    [
        ("", DEFAULT_MUTE_MINUTES),
        ("10 分钟", 10),
        ("10分钟", 10),
        ("1", 1),
        ("1440", 1440),
    ],
)
def test_a_mute_is_one_to_1440_minutes(args: str, minutes: int) -> None:
    assert mute_minutes(args) == minutes


@pytest.mark.parametrize("args", ["-1", "0", "十分钟", "10 小时", "1.5", "99999 分钟"])
def test_a_bad_length_is_answered_not_applied(args: str) -> None:
    answer = mute_minutes(args)
    assert isinstance(answer, str)
    expected = "最多安静 1440 分钟" if args.startswith("99999") else "用法：/安静 N 分钟"
    assert answer.startswith(expected)


def event(kind: str, why: str = "", **payload: object) -> TrailEvent:
    return TrailEvent(kind, why, T0, None, 7, dict(payload))


def test_a_dropped_message_is_explained_by_its_rule() -> None:
    path = MessagePath(
        7, "今天吃什么呢大家", False, (event("inbound"), event("gate_dropped", "asleep")), None
    )
    assert why_not(path) == f"我没回你那句「今天吃什么呢大家」：{REASONS['asleep']}。"


def test_a_silence_says_its_reason_and_a_reply_says_so() -> None:
    turn = TurnTrace(
        3, (event("turn_started"), event("agent_decided", "silent", reason="在聊私事")), ()
    )
    silent = MessagePath(7, "嗯", False, (event("gate_passed", "attention"),), turn)
    assert why_not(silent) == "你那句「嗯」我看过了，决定不接：在聊私事。"
    row = OutboxState(1, "message", "sent", 1, "9", "", "agent_reply")
    sent = TurnTrace(4, (event("agent_decided", "reply"),), (row,))
    assert why_not(MessagePath(8, "在吗", False, (), sent)) == "你那句「在吗」我回过了呀。"
    assert why_not(MessagePath(9, "x", True, (), None)).startswith("你那条消息被静默了")


def test_recent_decisions_read_as_short_lines() -> None:
    lines = recent_lines([event("gate_dropped", "frequency_cap"), event("turn_finished", "done")])
    assert lines == [f"- 没接：{REASONS['frequency_cap']}", "- 看过了：做完了"]


def test_a_command_inside_a_quote_is_not_a_command() -> None:
    quoted = (Segment(SegmentKind.REPLY, target="42"), Segment(SegmentKind.TEXT, text="哈哈"))
    assert parse_command(typed_text(quoted), ["安静"], Syntax()) is None
    said = (Segment(SegmentKind.TEXT, text="他刚才说 /安静 10 分钟"),)
    assert parse_command(typed_text(said), ["安静"], Syntax()) is None


def test_no_prefix_and_other_starts_follow_command_start() -> None:
    bare = Syntax(starts=("/", ""))
    assert parse_command("状态", ["状态"], bare) == ("状态", "")
    assert parse_command("#状态", ["状态"], Syntax(starts=("#",))) == ("状态", "")
    assert parse_command("/状态", ["状态"], Syntax(starts=("#",))) is None


def test_every_feature_names_settings_of_the_registry() -> None:
    assert set(FEATURES) == {"模型聊天", "插话", "复读", "欢迎", "表情包", "记忆"}
    assert {section for parts in FEATURES.values() for section, *_ in parts} == {"gate", "features"}
