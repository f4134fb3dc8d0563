"""The action protocol: which actions a turn may take, and whether a chosen one is legal.

Everything here is pure. The action set is computed in one place (`available_actions`); the
frame is fixed for the turn and only ever narrows; validation turns a tool call into a
decision or a protocol error with a reason the model can read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from pallas.core.actions import Capability, reaction_id
from pallas.core.inbound import StreamKind
from pallas.product.llm.agent.output import IntentKind, ShapedReply, shape_reply

MAX_WAIT_S = 300


class Action(StrEnum):
    REPLY = "reply"
    SILENT = "silent"
    WAIT = "wait"
    REACT = "react"
    POKE = "poke"


TERMINAL = frozenset(Action)


class ProtocolFault(StrEnum):
    PARSE_ERROR = "parse_error"  # no terminal action, or arguments that cannot be read
    ILLEGAL_ACTION = "illegal_action"  # an action or target the frame does not allow


@dataclass(frozen=True)
class FrameInputs:
    kind: StreamKind
    forced: bool
    may_wait: bool
    capabilities: frozenset[Capability]
    proactive: bool = False  # the bot started the turn: nobody is waiting for an answer


def available_actions(inputs: FrameInputs) -> frozenset[Action]:
    """Private, direct and forced turns must answer; a group deliberation may also stay out;
    a turn of the bot's own may speak or not, and has no message to react to or wait on."""
    actions = {Action.REPLY}
    if inputs.proactive:
        return frozenset({Action.REPLY, Action.SILENT})
    if inputs.kind is StreamKind.PRIVATE or inputs.forced:
        return frozenset(actions)
    actions.add(Action.SILENT)
    if Capability.REACT in inputs.capabilities:
        actions.add(Action.REACT)
    if Capability.POKE in inputs.capabilities:
        actions.add(Action.POKE)
    if inputs.may_wait:
        actions.add(Action.WAIT)
    return frozenset(actions)


@dataclass(frozen=True)
class DecisionFrame:
    selectable: tuple[int, ...]  # this batch's message ids, none after the watermark
    selectable_users: tuple[str, ...]  # the batch's senders (poke targets)
    watermark: int
    actions: frozenset[Action]
    forced: bool
    tool_calls_left: int  # look-ups and other tools before the terminal action
    bot_names: tuple[str, ...] = ()
    max_bubbles: int = 4
    max_chars: int = 1500

    def after_tool_call(self) -> DecisionFrame:
        """One tool call spent: when the budget is gone, no tool is offered any more."""
        return replace(self, tool_calls_left=max(0, self.tool_calls_left - 1))


@dataclass(frozen=True)
class ReplyDecision:
    reply: ShapedReply
    target: int | None


@dataclass(frozen=True)
class SilentDecision:
    reason: str


@dataclass(frozen=True)
class WaitDecision:
    seconds: int | None


@dataclass(frozen=True)
class ReactDecision:
    message_id: int
    reaction: str


@dataclass(frozen=True)
class PokeDecision:
    user_id: str


Decision = ReplyDecision | SilentDecision | WaitDecision | ReactDecision | PokeDecision


@dataclass(frozen=True)
class ProtocolError:
    fault: ProtocolFault
    reason: str  # addressed to the model, fed back once


Chosen = Decision | ProtocolError


def validate_call(name: str, arguments: Mapping[str, Any], frame: DecisionFrame) -> Chosen:
    try:
        action = Action(name)
    except ValueError:
        return _illegal(f"没有叫 {name} 的动作；可用的动作：{_names(frame)}")
    if action not in frame.actions:
        return _illegal(f"这一轮不能用 {name}；可用的动作：{_names(frame)}")
    return _TERMINAL_VALIDATORS[action](arguments, frame)


def _reply(arguments: Mapping[str, Any], frame: DecisionFrame) -> Chosen:
    text = arguments.get("text")
    if not isinstance(text, str) or not text.strip():
        return ProtocolError(ProtocolFault.PARSE_ERROR, "reply 需要非空的 text")
    target = arguments.get("target_message_id")
    if target is not None:
        checked = _target(target, frame)
        if isinstance(checked, ProtocolError):
            return checked
        target = checked
    shaped = shape_reply(
        text, bot_names=frame.bot_names, max_bubbles=frame.max_bubbles, max_chars=frame.max_chars
    )
    if shaped.empty and not any(i.kind is IntentKind.STICKER for i in shaped.intents):
        return ProtocolError(ProtocolFault.PARSE_ERROR, "reply 的 text 去掉标记后是空的")
    return ReplyDecision(shaped, target)


def _silent(arguments: Mapping[str, Any], frame: DecisionFrame) -> Chosen:
    if frame.forced:  # also kept out of the action set; checked again on purpose
        return _illegal("这条消息必须回复，不能沉默")
    return SilentDecision(str(arguments.get("reason") or "").strip()[:200])


def _wait(arguments: Mapping[str, Any], frame: DecisionFrame) -> Chosen:
    seconds = arguments.get("seconds")
    if seconds is None:
        return WaitDecision(None)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        return ProtocolError(ProtocolFault.PARSE_ERROR, "wait 的 seconds 应是非负整数")
    return WaitDecision(min(int(seconds), MAX_WAIT_S))


def _react(arguments: Mapping[str, Any], frame: DecisionFrame) -> Chosen:
    target = _target(arguments.get("message_id"), frame)
    if isinstance(target, ProtocolError):
        return target
    reaction = arguments.get("emoji")
    if not isinstance(reaction, str) or reaction_id(reaction) is None:
        return _illegal(f"emoji 只能从表情回应词表里选，{reaction!r} 不在词表里")
    return ReactDecision(target, reaction)


def _poke(arguments: Mapping[str, Any], frame: DecisionFrame) -> Chosen:
    user_id = str(arguments.get("user_id") or "").strip()
    if user_id not in frame.selectable_users:
        allowed = "、".join(frame.selectable_users)
        return _illegal(f"只能戳这一批消息的发送者（uid：{allowed}），不能戳 {user_id or '空'}")
    return PokeDecision(user_id)


def _target(value: object, frame: DecisionFrame) -> int | ProtocolError:
    if isinstance(value, bool) or value is None:
        return ProtocolError(ProtocolFault.PARSE_ERROR, "需要一个消息编号（数字）")
    try:
        message_id = int(str(value).strip().lstrip("#"))
    except ValueError:
        return ProtocolError(ProtocolFault.PARSE_ERROR, f"消息编号应是数字，不是 {value!r}")
    if message_id > frame.watermark or message_id not in frame.selectable:
        allowed = "、".join(f"#{i}" for i in frame.selectable)
        return _illegal(f"只能指向这一批的消息（{allowed}），#{message_id} 不在其中")
    return message_id


def _illegal(reason: str) -> ProtocolError:
    return ProtocolError(ProtocolFault.ILLEGAL_ACTION, reason)


def _names(frame: DecisionFrame) -> str:
    return "、".join(sorted(a.value for a in frame.actions))


_TERMINAL_VALIDATORS = {
    Action.REPLY: _reply,
    Action.SILENT: _silent,
    Action.WAIT: _wait,
    Action.REACT: _react,
    Action.POKE: _poke,
}
