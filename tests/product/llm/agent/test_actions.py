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
        ("reply", {"text": "[心情:开心]"}, ProtocolFault.PARSE_ERROR, "空的"),
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


# The model reads these refusals verbatim and retries from them: the allowed ids, users and
# actions it is told must be exactly the ones the frame offers.
@pytest.mark.parametrize(
    ("name", "arguments", "fault", "reason"),
    [
        (
            "dance",
            {},
            ProtocolFault.ILLEGAL_ACTION,
            "没有叫 dance 的动作；可用的动作：poke、react、reply、silent、wait",
        ),
        (
            "react",
            {"emoji": "赞"},
            ProtocolFault.PARSE_ERROR,
            "需要一个消息编号（数字）",
        ),
        (
            "react",
            {"message_id": True, "emoji": "赞"},
            ProtocolFault.PARSE_ERROR,
            "需要一个消息编号（数字）",
        ),
        (
            "reply",
            {"text": "hi", "target_message_id": False},
            ProtocolFault.PARSE_ERROR,
            "需要一个消息编号（数字）",
        ),
        (
            "reply",
            {"text": "hi", "target_message_id": "小明"},
            ProtocolFault.PARSE_ERROR,
            "消息编号应是数字，不是 '小明'",
        ),
        (
            "reply",
            {"text": "hi", "target_message_id": "X11"},
            ProtocolFault.PARSE_ERROR,
            "消息编号应是数字，不是 'X11'",
        ),
        (
            "reply",
            {"text": "hi", "target_message_id": 9},
            ProtocolFault.ILLEGAL_ACTION,
            "只能指向这一批的消息（#10、#11），#9 不在其中",
        ),
        (
            "react",
            {"message_id": 10, "emoji": "🦄"},
            ProtocolFault.ILLEGAL_ACTION,
            "emoji 只能从表情回应词表里选，'🦄' 不在词表里",
        ),
        (
            "react",
            {"message_id": 10},
            ProtocolFault.ILLEGAL_ACTION,
            "emoji 只能从表情回应词表里选，None 不在词表里",
        ),
        (
            "poke",
            {"user_id": "7"},
            ProtocolFault.ILLEGAL_ACTION,
            "只能戳这一批消息的发送者（uid：42、43），不能戳 7",
        ),
        (
            "poke",
            {},
            ProtocolFault.ILLEGAL_ACTION,
            "只能戳这一批消息的发送者（uid：42、43），不能戳 空",
        ),
        (
            "poke",
            {"user_id": "   "},
            ProtocolFault.ILLEGAL_ACTION,
            "只能戳这一批消息的发送者（uid：42、43），不能戳 空",
        ),
        ("wait", {"seconds": -1}, ProtocolFault.PARSE_ERROR, "wait 的 seconds 应是非负整数"),
        ("wait", {"seconds": True}, ProtocolFault.PARSE_ERROR, "wait 的 seconds 应是非负整数"),
        ("wait", {"seconds": "30"}, ProtocolFault.PARSE_ERROR, "wait 的 seconds 应是非负整数"),
        ("reply", {"text": 5}, ProtocolFault.PARSE_ERROR, "reply 需要非空的 text"),
        (
            "reply",
            {"text": "[心情:开心]"},
            ProtocolFault.PARSE_ERROR,
            "reply 的 text 去掉标记后是空的",
        ),
    ],
    ids=[
        "unknown action lists every offered action",
        "react without a message id",
        "a boolean is not a message id",
        "a false target is not a message id",
        "a name is not a message id",
        "only # may prefix a message id",
        "a target outside the batch lists the batch",
        "an emoji outside the vocabulary",
        "a missing emoji",
        "a poke outside the batch lists the senders",
        "a poke without a user",
        "a poke at a blank user",
        "a negative wait",
        "a boolean wait",
        "a wait given as text",
        "a reply whose text is not a string",
        "a reply that is only markup",
    ],
)
def test_refusals_tell_the_model_exactly_what_is_allowed(
    name: str, arguments: dict[str, object], fault: ProtocolFault, reason: str
) -> None:
    assert validate_call(name, arguments, frame()) == ProtocolError(fault, reason)


@pytest.mark.parametrize(
    ("name", "offered", "reason"),
    [
        ("silent", {A.REPLY}, "这一轮不能用 silent；可用的动作：reply"),
        ("poke", {A.REPLY, A.WAIT, A.SILENT}, "这一轮不能用 poke；可用的动作：reply、silent、wait"),
        ("dance", {A.REPLY, A.REACT}, "没有叫 dance 的动作；可用的动作：react、reply"),
    ],
    ids=["only reply offered", "no poke capability", "unknown action, narrowed frame"],
)
def test_refusals_list_only_the_actions_of_this_turn(
    name: str, offered: set[Action], reason: str
) -> None:
    result = validate_call(name, {}, frame(actions=frozenset(offered)))
    assert result == ProtocolError(ProtocolFault.ILLEGAL_ACTION, reason)


def test_a_forced_silence_is_refused_with_the_reason() -> None:
    forced = frame(forced=True, actions=frozenset({A.REPLY, A.SILENT}))
    result = validate_call("silent", {"reason": "x"}, forced)
    assert result == ProtocolError(ProtocolFault.ILLEGAL_ACTION, "这条消息必须回复，不能沉默")


def test_a_target_after_the_watermark_is_refused_even_if_listed() -> None:
    # The watermark is the last message the model saw; a later id cannot be answered.
    late = DecisionFrame(
        selectable=(10, 11, 12),
        selectable_users=("42",),
        watermark=11,
        actions=frozenset(Action),
        forced=False,
        tool_calls_left=0,
    )
    result = validate_call("reply", {"text": "hi", "target_message_id": 12}, late)
    assert result == ProtocolError(
        ProtocolFault.ILLEGAL_ACTION, "只能指向这一批的消息（#10、#11、#12），#12 不在其中"
    )
    assert validate_call("react", {"message_id": 11, "emoji": "赞"}, late) == ReactDecision(
        11, "赞"
    )


@pytest.mark.parametrize(
    ("arguments", "target"),
    [
        ({"text": "好的"}, None),
        ({"text": "好的", "target_message_id": None}, None),
        ({"text": "好的", "target_message_id": 11}, 11),
        ({"text": "好的", "target_message_id": "#10"}, 10),
        ({"text": "好的", "target_message_id": " 10 "}, 10),
    ],
    ids=["no target", "explicit null target", "number", "hash-prefixed text", "padded text"],
)
def test_a_reply_keeps_the_target_it_names(
    arguments: dict[str, object], target: int | None
) -> None:
    result = validate_call("reply", arguments, frame())
    assert isinstance(result, ReplyDecision)
    assert result.target == target and result.reply.bubbles == ("好的",)


def test_a_reply_is_shaped_to_the_frames_limits() -> None:
    tight = DecisionFrame(
        selectable=(10,),
        selectable_users=("42",),
        watermark=10,
        actions=frozenset(Action),
        forced=False,
        tool_calls_left=0,
        max_bubbles=2,
        max_chars=5,
    )
    few = validate_call("reply", {"text": "一\n二\n三"}, tight)
    assert isinstance(few, ReplyDecision) and few.reply.bubbles == ("一", "二 三")
    short = validate_call("reply", {"text": "abcdefghij"}, tight)
    assert isinstance(short, ReplyDecision) and short.reply.bubbles == ("abcd…",)


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({"reason": "  不关我事  "}, "不关我事"),
        ({}, ""),
        ({"reason": None}, ""),
        ({"reason": "长" * 250}, "长" * 200),
        ({"reason": "长" * 200}, "长" * 200),
    ],
    ids=["trimmed", "missing", "null", "cut at 200 chars", "200 chars kept"],
)
def test_a_silence_keeps_a_short_reason(arguments: dict[str, object], reason: str) -> None:
    assert validate_call("silent", arguments, frame()) == SilentDecision(reason)


@pytest.mark.parametrize(
    ("arguments", "seconds"),
    [({}, None), ({"seconds": None}, None), ({"seconds": 12.7}, 12), ({"seconds": 0.0}, 0)],
    ids=["no seconds", "null seconds", "fraction truncated", "zero float"],
)
def test_a_wait_reads_its_seconds(arguments: dict[str, object], seconds: int | None) -> None:
    assert validate_call("wait", arguments, frame()) == WaitDecision(seconds)


@pytest.mark.parametrize(
    ("arguments", "decision"),
    [
        ({"user_id": " 43 "}, PokeDecision("43")),
        ({"user_id": 42}, PokeDecision("42")),
        ({"message_id": "#11", "emoji": "赞"}, ReactDecision(11, "赞")),
    ],
    ids=["padded uid", "numeric uid", "react by hash id"],
)
def test_targets_are_normalised(arguments: dict[str, object], decision: object) -> None:
    name = "poke" if isinstance(decision, PokeDecision) else "react"
    assert validate_call(name, arguments, frame()) == decision


def test_only_react_capability_offers_react() -> None:
    inputs = FrameInputs(StreamKind.GROUP, False, False, frozenset({Capability.REACT}))
    assert available_actions(inputs) == {A.REPLY, A.SILENT, A.REACT}


@pytest.mark.parametrize("kind", list(StreamKind))
@pytest.mark.parametrize("forced", [False, True])
@pytest.mark.parametrize("may_wait", [False, True])
@pytest.mark.parametrize(
    "caps", [frozenset(), frozenset({Capability.REACT}), ALL_CAPS], ids=["none", "react", "all"]
)
def test_a_turn_the_bot_started_itself_may_only_reply_or_stay_silent(
    kind: StreamKind, forced: bool, may_wait: bool, caps: frozenset[Capability]
) -> None:
    """Nobody waits for an answer (so silence is allowed even in a private chat), and there is
    no message to react to, poke about or wait on."""
    inputs = FrameInputs(kind, forced, may_wait, caps, proactive=True)
    assert available_actions(inputs) == {A.REPLY, A.SILENT}


def test_a_promise_or_an_offence_marker_alone_is_no_reply() -> None:
    """Only a sticker may stand for the words; a promise or an offence is said beside them."""
    for raw in ("[承诺:明天08:00 提醒开会]", "[冒犯:骂人]"):
        result = validate_call("reply", {"text": raw}, frame())
        assert result == ProtocolError(ProtocolFault.PARSE_ERROR, "reply 的 text 去掉标记后是空的")


def test_a_reply_carries_its_promise_and_offence_intents() -> None:
    result = validate_call("reply", {"text": "好的主人[承诺:明天08:00 提醒开会]"}, frame())
    assert isinstance(result, ReplyDecision)
    assert result.reply.bubbles == ("好的主人",)
    assert [(i.kind.value, i.value) for i in result.reply.intents] == [
        ("promise", "明天08:00 提醒开会")
    ]


def test_a_silence_keeps_its_reason_as_written_for_the_listeners() -> None:
    """The handler takes the markers out of the reason (output.take_intents), not validation."""
    result = validate_call("silent", {"reason": " 不想理他[冒犯:骂人] "}, frame())
    assert result == SilentDecision("不想理他[冒犯:骂人]")


def test_a_sticker_intent_alone_is_a_reply() -> None:
    """A short attitude may be a sticker and nothing else: the reply form sends it."""
    result = validate_call("reply", {"text": "[表情:哈哈]"}, frame())
    assert isinstance(result, ReplyDecision)
    assert result.reply.bubbles == ()
    assert [(i.kind.value, i.value) for i in result.reply.intents] == [("sticker", "哈哈")]
