"""The action set and validation, table by table (pure)."""

from __future__ import annotations

import pytest

from pallas.core.actions import Capability
from pallas.core.inbound import StreamKind
from pallas.product.llm.agent.actions import (
    MAX_WAIT_S,
    Action,
    DecisionFrame,
    FrameInputs,
    PokeDecision,
    ProtocolError,
    ProtocolFault,
    ReactDecision,
    ReplyDecision,
    SilentDecision,
    WaitDecision,
    available_actions,
    validate_call,
)

ALL_CAPS = frozenset({Capability.POKE, Capability.REACT})
A = Action


@pytest.mark.parametrize(
    ("kind", "forced", "may_wait", "caps", "expected"),
    [
        (StreamKind.PRIVATE, True, True, ALL_CAPS, {A.REPLY}),
        (StreamKind.PRIVATE, False, True, ALL_CAPS, {A.REPLY}),
        (StreamKind.GROUP, True, True, ALL_CAPS, {A.REPLY}),
        (StreamKind.GROUP, False, True, ALL_CAPS, {A.REPLY, A.SILENT, A.WAIT, A.REACT, A.POKE}),
        (StreamKind.GROUP, False, False, frozenset(), {A.REPLY, A.SILENT}),
        (
            StreamKind.GROUP,
            False,
            True,
            frozenset({Capability.POKE}),
            {A.REPLY, A.SILENT, A.WAIT, A.POKE},
        ),
    ],
)
def test_the_action_set(
    kind: StreamKind,
    forced: bool,
    may_wait: bool,
    caps: frozenset[Capability],
    expected: set[Action],
) -> None:
    assert available_actions(FrameInputs(kind, forced, may_wait, caps)) == expected


def frame(*, forced: bool = False, actions: frozenset[Action] | None = None) -> DecisionFrame:
    everything = frozenset(Action) - ({A.SILENT} if forced else set())
    return DecisionFrame(
        selectable=(10, 11),
        selectable_users=("42", "43"),
        watermark=11,
        actions=actions if actions is not None else everything,
        forced=forced,
        tool_calls_left=2,
        bot_names=("牛牛",),
    )


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("reply", {"text": "好的"}, ReplyDecision),
        ("reply", {"text": "好的", "target_message_id": 11}, ReplyDecision),
        ("reply", {"text": "好的", "target_message_id": "#10"}, ReplyDecision),
        ("silent", {"reason": "不关我事"}, SilentDecision),
        ("wait", {}, WaitDecision),
        ("wait", {"seconds": 30}, WaitDecision),
        ("react", {"message_id": 10, "emoji": "赞"}, ReactDecision),
        ("react", {"message_id": 10, "emoji": "ok"}, ReactDecision),
        ("poke", {"user_id": "43"}, PokeDecision),
    ],
)
def test_legal_calls_become_decisions(
    name: str, arguments: dict[str, object], expected: type
) -> None:
    assert isinstance(validate_call(name, arguments, frame()), expected)


@pytest.mark.parametrize(
    ("name", "arguments", "fault", "says"),
    [
        ("dance", {}, ProtocolFault.ILLEGAL_ACTION, "没有叫 dance 的动作"),
        ("reply", {}, ProtocolFault.PARSE_ERROR, "非空的 text"),
        ("reply", {"text": "   "}, ProtocolFault.PARSE_ERROR, "非空的 text"),
        ("reply", {"text": "[表情:开心]"}, ProtocolFault.PARSE_ERROR, "空的"),
        (
            "reply",
            {"text": "hi", "target_message_id": 9},
            ProtocolFault.ILLEGAL_ACTION,
            "#9 不在其中",
        ),
        ("reply", {"text": "hi", "target_message_id": 12}, ProtocolFault.ILLEGAL_ACTION, "#12"),
        ("reply", {"text": "hi", "target_message_id": "小明"}, ProtocolFault.PARSE_ERROR, "数字"),
        ("react", {"message_id": 10, "emoji": "🦄"}, ProtocolFault.ILLEGAL_ACTION, "词表"),
        ("react", {"message_id": 99, "emoji": "赞"}, ProtocolFault.ILLEGAL_ACTION, "#99"),
        ("poke", {"user_id": "7"}, ProtocolFault.ILLEGAL_ACTION, "只能戳"),
        ("wait", {"seconds": -3}, ProtocolFault.PARSE_ERROR, "非负"),
    ],
)
def test_illegal_calls_say_why(
    name: str, arguments: dict[str, object], fault: ProtocolFault, says: str
) -> None:
    result = validate_call(name, arguments, frame())
    assert isinstance(result, ProtocolError)
    assert result.fault is fault
    assert says in result.reason


def test_a_forced_turn_cannot_be_silent_even_if_offered() -> None:
    forced = frame(forced=True, actions=frozenset({A.REPLY, A.SILENT}))
    result = validate_call("silent", {"reason": "x"}, forced)
    assert isinstance(result, ProtocolError) and "必须回复" in result.reason
    not_offered = validate_call("silent", {"reason": "x"}, frame(forced=True))
    assert isinstance(not_offered, ProtocolError)
    assert not_offered.fault is ProtocolFault.ILLEGAL_ACTION


def test_the_tool_budget_runs_out() -> None:
    f = frame()
    assert f.after_tool_call().tool_calls_left == 1
    assert f.after_tool_call().after_tool_call().after_tool_call().tool_calls_left == 0


def test_a_reply_is_shaped_before_it_is_accepted() -> None:
    result = validate_call("reply", {"text": "牛牛：好呀\n[表情:开心]"}, frame())
    assert isinstance(result, ReplyDecision)
    assert result.reply.bubbles == ("好呀",)
    assert [i.value for i in result.reply.intents] == ["开心"]


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("poke", {"user_id": "43"}),
        ("react", {"message_id": 10, "emoji": "赞"}),
        ("wait", {"seconds": 5}),
        ("silent", {"reason": "x"}),
    ],
)
def test_an_action_not_offered_this_turn_is_refused(
    name: str, arguments: dict[str, object]
) -> None:
    only_reply = frame(actions=frozenset({A.REPLY}))  # e.g. no capability, already waited
    result = validate_call(name, arguments, only_reply)
    assert isinstance(result, ProtocolError)
    assert result.fault is ProtocolFault.ILLEGAL_ACTION and "这一轮不能用" in result.reason


@pytest.mark.parametrize(
    ("seconds", "expected"), [(0, 0), (30, 30), (MAX_WAIT_S, MAX_WAIT_S), (10**6, MAX_WAIT_S)]
)
def test_a_wait_is_capped(seconds: int, expected: int) -> None:
    result = validate_call("wait", {"seconds": seconds}, frame())
    assert isinstance(result, WaitDecision) and result.seconds == expected
