"""The decision loop: ask, run tool calls, validate the terminal action, repair once.

    render -> model -> tool calls (or text calls) -> a tool? run it, append, ask again
                                                 -> terminal? validate -> decision
                                                 -> protocol error? feed back once, else fail

Nothing degrades into a plain reply: a turn either ends with a validated decision or with a
failure reason (`parse_error`, `illegal_action`, `timeout`, `provider_error`,
`model_unavailable`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any
from typing import Protocol as TypingProtocol

from pallas.product.llm.agent.actions import (
    TERMINAL,
    Decision,
    DecisionFrame,
    ProtocolError,
    ProtocolFault,
    ReplyDecision,
    validate_call,
)
from pallas.product.llm.agent.output import shape_reply
from pallas.product.llm.agent.text_protocol import describe_functions, parse_text_actions
from pallas.product.llm.agent.tool_specs import offered_tools, text_functions, tool_schemas
from pallas.product.llm.assembler.context import PreparedTurn
from pallas.product.llm.assembler.prompt import (
    Message,
    Protocol,
    ProtocolMode,
    render_decision,
    render_reply_request,
    tool_result,
)
from pallas.product.llm.tool_loop import ToolRun
from pallas.product.llm.tools.base import ToolSpec
from pallas.product.llm.tools.registry import to_wire
from pallas.providers.budget import BudgetReachedError
from pallas.providers.catalog import ModelType
from pallas.providers.errors import (
    AllCandidatesFailedError,
    ModelRejectedError,
    NoModelError,
    ProviderError,
)
from pallas.providers.manager import ModelManager
from pallas.providers.openai_wire import ChatRequest
from pallas.providers.results import CallTag, ChatResult, Purpose


class FailureReason(StrEnum):
    PARSE_ERROR = "parse_error"
    ILLEGAL_ACTION = "illegal_action"
    TIMEOUT = "timeout"
    PROVIDER_ERROR = "provider_error"
    MODEL_UNAVAILABLE = "model_unavailable"
    BUDGET_REACHED = "budget_reached"  # today's spending cap: no model is called


@dataclass(frozen=True)
class AgentPlan:
    """Fixed at start-up from what the catalog holds, never changed mid-turn."""

    decision_type: ModelType
    mode: ProtocolMode
    split: bool  # a second call (the chat model) writes the reply text
    max_rounds: int = 4
    repair_limit: int = 1


@dataclass
class AgentDeps:
    models: ModelManager
    plan: AgentPlan


class Toolbox(TypingProtocol):
    """The turn's non-terminal tools (see agent/toolbox.py)."""

    def specs(self) -> tuple[ToolSpec, ...]: ...

    @property
    def call_available(self) -> bool: ...

    async def run(self, wire: str, arguments: Mapping[str, Any] | None) -> ToolRun: ...


@dataclass(frozen=True)
class ToolRequest:
    wire: str
    arguments: Mapping[str, Any] | None


@dataclass
class AgentOutcome:
    decision: Decision | None = None
    failure: FailureReason | None = None
    detail: str = ""
    rounds: int = 0
    models: list[str] = field(default_factory=list)
    cost: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    repairs: list[str] = field(default_factory=list)
    lookups: list[dict[str, Any]] = field(default_factory=list)

    def count(self, result: ChatResult) -> None:
        self.models.append(result.model)
        self.cost += result.cost
        self.prompt_tokens += result.usage.prompt_tokens
        self.completion_tokens += result.usage.completion_tokens

    def fail(self, reason: FailureReason, detail: str) -> AgentOutcome:
        self.failure, self.detail = reason, detail
        return self


async def decide(
    turn: PreparedTurn, frame: DecisionFrame, deps: AgentDeps, toolbox: Toolbox
) -> AgentOutcome:
    outcome = AgentOutcome()
    try:
        await _decision_rounds(turn, frame, deps, toolbox, outcome)
        if isinstance(outcome.decision, ReplyDecision) and deps.plan.split:
            await _write_reply(turn, frame, deps, outcome)
    except BudgetReachedError as exc:
        return outcome.fail(FailureReason.BUDGET_REACHED, str(exc))
    except NoModelError as exc:
        return outcome.fail(FailureReason.MODEL_UNAVAILABLE, str(exc))
    except AllCandidatesFailedError as exc:
        reason = FailureReason.TIMEOUT if exc.timed_out else FailureReason.PROVIDER_ERROR
        return outcome.fail(reason, str(exc))
    except (ModelRejectedError, ProviderError) as exc:
        return outcome.fail(FailureReason.PROVIDER_ERROR, str(exc))
    return outcome


async def _decision_rounds(
    turn: PreparedTurn,
    frame: DecisionFrame,
    deps: AgentDeps,
    toolbox: Toolbox,
    outcome: AgentOutcome,
) -> None:
    plan = deps.plan
    for_round = _round_tools(frame, toolbox)
    messages = render_decision(
        turn, _protocol(frame, plan.mode, for_round), decision_only=plan.split
    )
    for _ in range(plan.max_rounds):
        outcome.rounds += 1
        result = await _ask(deps, turn, messages, frame, for_round, plan)
        outcome.count(result)
        chosen, call_id = _pick(result, frame, for_round, plan.mode)
        if isinstance(chosen, ProtocolError):
            if len(outcome.repairs) >= plan.repair_limit:
                outcome.fail(FailureReason(chosen.fault.value), chosen.reason)
                return
            outcome.repairs.append(chosen.reason)
            messages += _repair(result, call_id, chosen.reason, plan.mode)
        elif isinstance(chosen, ToolRequest):
            run = await toolbox.run(chosen.wire, chosen.arguments)
            outcome.lookups.append({"tool": run.name, "outcome": run.outcome})
            messages += _observation(result, call_id, chosen.wire, run.data, plan.mode)
            frame = frame.after_tool_call()
            for_round = _round_tools(frame, toolbox)
            messages = _refresh_protocol(messages, turn, frame, for_round, plan)
        else:
            outcome.decision = chosen
            return
    outcome.fail(FailureReason.PARSE_ERROR, f"no terminal action in {plan.max_rounds} rounds")


def _round_tools(frame: DecisionFrame, toolbox: Toolbox) -> tuple[ToolSpec, ...]:
    return offered_tools(frame, toolbox.specs(), toolbox.call_available)


async def _ask(
    deps: AgentDeps,
    turn: PreparedTurn,
    messages: list[Message],
    frame: DecisionFrame,
    tools: tuple[ToolSpec, ...],
    plan: AgentPlan,
) -> ChatResult:
    schemas = tool_schemas(frame, tools) if plan.mode is ProtocolMode.NATIVE else []
    return await deps.models.chat(
        ChatRequest(messages=list(messages), tools=schemas),
        tag=CallTag(Purpose.DECISION, turn.stream_id, turn.turn_id, _stream_key(turn)),
        model_type=plan.decision_type,
    )


def _pick(
    result: ChatResult,
    frame: DecisionFrame,
    tools: tuple[ToolSpec, ...],
    mode: ProtocolMode,
) -> tuple[Decision | ToolRequest | ProtocolError, str]:
    """The call this round acts on: the first terminal one, else the first tool call."""
    calls = _calls(result, frame, tools, mode)
    if isinstance(calls, ProtocolError):
        return calls, ""
    terminal = {action.value for action in TERMINAL}
    ranked = [i for i, (n, _, _) in enumerate(calls) if n in terminal]
    name, arguments, call_id = calls[ranked[0] if ranked else 0]
    if name not in terminal:
        if frame.tool_calls_left <= 0:
            reason = "查资料的次数用完了，请直接选一个结束本轮的动作"
            return ProtocolError(ProtocolFault.ILLEGAL_ACTION, reason), call_id
        return ToolRequest(name, arguments), call_id
    if arguments is None:
        return ProtocolError(ProtocolFault.PARSE_ERROR, f"{name} 的参数不是 JSON 对象"), call_id
    return validate_call(name, arguments, frame), call_id


def _calls(
    result: ChatResult,
    frame: DecisionFrame,
    tools: tuple[ToolSpec, ...],
    mode: ProtocolMode,
) -> list[tuple[str, dict[str, Any] | None, str]] | ProtocolError:
    if mode is ProtocolMode.NATIVE:
        if not result.tool_calls:
            return ProtocolError(ProtocolFault.PARSE_ERROR, "没有调用任何动作；必须调用一个动作")
        return [(c.name, c.arguments, c.id) for c in result.tool_calls]
    functions, _ = text_functions(frame, tools)
    parsed = parse_text_actions(result.text, functions)
    if not parsed.calls:
        hints = "；".join(parsed.issues) or "没有找到动作调用"
        return ProtocolError(ProtocolFault.PARSE_ERROR, f"{hints}。请在一个代码块里写出调用")
    # Calls the parser had to drop are ignored when a valid one remains: it is lenient.
    return [(c.name, dict(c.arguments), "") for c in parsed.calls]


def _repair(result: ChatResult, call_id: str, reason: str, mode: ProtocolMode) -> list[Message]:
    hint = f"上一步不符合要求：{reason}。请重新选择一个动作。"
    if mode is ProtocolMode.NATIVE and call_id:
        call = next(c for c in result.tool_calls if c.id == call_id)
        return [
            _assistant_call(result, call.id, call.name, call.raw_arguments),
            {"role": "tool", "tool_call_id": call.id, "content": tool_result({"拒绝": hint})},
        ]
    return [
        {"role": "assistant", "content": result.text or "(空)"},
        {"role": "user", "content": hint},
    ]


def _observation(
    result: ChatResult, call_id: str, wire: str, observation: Any, mode: ProtocolMode
) -> list[Message]:
    if mode is ProtocolMode.NATIVE:
        native = next(c for c in result.tool_calls if c.id == call_id)
        return [
            _assistant_call(result, native.id, native.name, native.raw_arguments),
            {"role": "tool", "tool_call_id": native.id, "content": tool_result(observation)},
        ]
    return [
        {"role": "assistant", "content": result.text},
        {"role": "user", "content": f"【{wire} 的结果】{tool_result(observation)}"},
    ]


def _assistant_call(result: ChatResult, call_id: str, name: str, arguments: str) -> Message:
    return {
        "role": "assistant",
        "content": result.text or None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }


def _refresh_protocol(
    messages: list[Message],
    turn: PreparedTurn,
    frame: DecisionFrame,
    tools: tuple[ToolSpec, ...],
    plan: AgentPlan,
) -> list[Message]:
    """The offer changed (budget spent, tools found): the system message says so from now on."""
    protocol = _protocol(frame, plan.mode, tools)
    system = render_decision(turn, protocol, decision_only=plan.split)[0]
    return [system, *messages[1:]]


def _protocol(frame: DecisionFrame, mode: ProtocolMode, tools: tuple[ToolSpec, ...]) -> Protocol:
    actions = sorted(a.value for a in frame.actions)
    tool_names = [to_wire(spec.name) for spec in tools]
    if mode is ProtocolMode.NATIVE:
        return Protocol(mode, actions, tools=tool_names)
    functions, descriptions = text_functions(frame, tools)
    return Protocol(mode, actions, describe_functions(functions, descriptions), tool_names)


async def _write_reply(
    turn: PreparedTurn, frame: DecisionFrame, deps: AgentDeps, outcome: AgentOutcome
) -> None:
    """Split mode: the chat model writes the text the planner decided to say."""
    assert isinstance(outcome.decision, ReplyDecision)
    decided = outcome.decision
    messages = render_reply_request(turn, decided.reply.text, decided.target)
    for attempt in range(deps.plan.repair_limit + 1):
        result = await deps.models.chat(
            ChatRequest(messages=list(messages)),
            tag=CallTag(Purpose.REPLY, turn.stream_id, turn.turn_id, _stream_key(turn)),
            model_type=ModelType.CHAT,
        )
        outcome.count(result)
        shaped = shape_reply(
            result.text,
            bot_names=frame.bot_names,
            max_bubbles=frame.max_bubbles,
            max_chars=frame.max_chars,
        )
        if not shaped.empty:
            outcome.decision = replace(decided, reply=shaped)
            return
        if attempt < deps.plan.repair_limit:
            outcome.repairs.append("回复正文是空的")
            messages += [
                {"role": "assistant", "content": result.text or "(空)"},
                {"role": "user", "content": "上一条是空的。直接写出要发出的话。"},
            ]
    outcome.decision = None
    outcome.fail(FailureReason.PARSE_ERROR, "the replyer wrote no visible text")


def _stream_key(turn: PreparedTurn) -> str:
    return f"{turn.stream.kind.value}:{turn.stream.external_id}"
