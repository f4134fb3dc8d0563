"""The conversation agent as the kernel's turn handler.

assemble context -> frame -> decide -> act (reply / react / poke) or hand back
(silent, wait) -> every step an audit event under the turn id
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import Capability, ChatAction, Origin, Poke, Reaction
from pallas.core.clock import utc_now
from pallas.core.inbound import Segment, SegmentKind
from pallas.product.conversation.delivery.contract import (
    OutgoingMessage,
    OutgoingReply,
    Outlet,
    ReplyDelivery,
    Sender,
    should_quote,
)
from pallas.product.conversation.delivery.payload import PayloadError
from pallas.product.conversation.gate.gate import Outcome
from pallas.product.conversation.turns.turn import Turn, TurnDecision
from pallas.product.llm.agent.actions import (
    DecisionFrame,
    FrameInputs,
    PokeDecision,
    ReactDecision,
    ReplyDecision,
    SilentDecision,
    WaitDecision,
    available_actions,
)
from pallas.product.llm.agent.config import AgentConfig
from pallas.product.llm.agent.loop import AgentDeps, AgentOutcome, FailureReason, decide
from pallas.product.llm.agent.output import Intent, take_intents
from pallas.product.llm.agent.plan import plan_for
from pallas.product.llm.agent.reply_forms import (
    FormContext,
    IntentListener,
    ReplyForm,
    ReplyShape,
    apply_forms,
    tell_listeners,
)
from pallas.product.llm.agent.toolbox import TurnToolbox
from pallas.product.llm.assembler.context import (
    AssemblyDeps,
    ContextLine,
    PreparedTurn,
    assemble_context,
)
from pallas.product.llm.tool_loop import ToolLoopDeps
from pallas.product.llm.tools.base import Conversation
from pallas.product.spending import CHAT_NOTICE
from pallas.providers.budget import day_of
from pallas.store.audit import EventKind
from pallas.store.conversation import newest_message_id
from pallas.store.ledger import LedgerEvent, LedgerWriter

# Failures meaning "no model could answer", for which a must-answer turn says so.
_NO_ANSWER = frozenset(
    {FailureReason.MODEL_UNAVAILABLE, FailureReason.TIMEOUT, FailureReason.PROVIDER_ERROR}
)


@dataclass
class AgentHandlerDeps:
    engine: AsyncEngine
    ledger: LedgerWriter
    assembly: AssemblyDeps
    agent: AgentDeps | None  # None: no chat model is configured
    tools: ToolLoopDeps
    outlet: Outlet
    delivery: ReplyDelivery
    # The per-turn limits as they are now (the console's `agent` section): asked at every
    # turn; a turn running when they change keeps the ones it started with.
    limits: Callable[[], AgentConfig]
    bot_names: tuple[str, ...]
    superusers: frozenset[str] = frozenset()
    clock: Callable[[], datetime] = utc_now
    # How a reply goes out besides words (stickers, voice); features add theirs at load time.
    forms: Sequence[ReplyForm] = ()
    # What acts on the model's declared intents (mood, promises, offence), reply or silence.
    listeners: Sequence[IntentListener] = ()
    # How a chat hears that today's model budget is spent (once a day); None: it does not.
    notices: Sender | None = None


@dataclass(frozen=True)
class _Limits:
    """What follows from the per-turn limits: the context budget and the plan."""

    config: AgentConfig
    assembly: AssemblyDeps
    agent: AgentDeps | None


class AgentTurnHandler:
    def __init__(self, deps: AgentHandlerDeps) -> None:
        self._deps = deps
        self._limits: _Limits | None = None

    def _current(self) -> _Limits:
        """The limits as they are now; the budget and the plan (split or one call, the
        rounds, decided from what the catalog holds) worked out again when they changed."""
        config, deps = self._deps.limits(), self._deps
        if self._limits is None or self._limits.config is not config:
            assembly = replace(deps.assembly, token_budget=config.context_token_budget)
            agent = deps.agent
            if agent is not None and (plan := plan_for(agent.models, config)) is not None:
                agent = AgentDeps(agent.models, plan)
            self._limits = _Limits(config, assembly, agent)
        return self._limits

    async def handle(self, turn: Turn) -> TurnDecision:
        limits = self._current()
        if limits.agent is None:  # nothing would read the context: do not assemble it
            return await self._no_answer(turn, "no chat model is configured", limits.config)
        prepared = await assemble_context(turn, limits.assembly)
        self._event(
            turn, EventKind.CONTEXT_ASSEMBLED, turn.trigger.value, _assembly_payload(prepared)
        )
        capabilities = await self._deps.outlet.capabilities(turn.stream.self_id)
        frame = build_frame(turn, prepared, capabilities, limits.config, self._deps.bot_names)
        conversation = Conversation(
            stream_id=turn.stream_id,
            stream=turn.stream,
            asker_is_owner=bool(set(frame.selectable_users) & self._deps.superusers),
        )
        toolbox = await TurnToolbox.open(
            self._deps.tools, prepared, conversation, self._deps.clock()
        )
        outcome = await decide(prepared, frame, limits.agent, toolbox)
        # A failure after the decision (the reply's writing refused, say) is a failure: the
        # planner's notes are never sent as the reply.
        if outcome.decision is None or outcome.failure is not None:
            return await self._failed(turn, outcome, limits.config)
        self._event(
            turn, EventKind.AGENT_DECIDED, _action_name(outcome), _decision_payload(outcome)
        )
        return await self._act(turn, prepared, outcome, toolbox.context.choices)

    async def _act(
        self,
        turn: Turn,
        prepared: PreparedTurn,
        outcome: AgentOutcome,
        choices: Mapping[str, Any],
    ) -> TurnDecision:
        decision = outcome.decision
        if isinstance(decision, SilentDecision):
            await self._hear(turn, take_intents(decision.reason)[1], {})
            return TurnDecision.SILENT
        if isinstance(decision, WaitDecision):
            return TurnDecision.WAIT
        if isinstance(decision, ReplyDecision):
            await self._reply(turn, prepared, decision, choices)
        elif isinstance(decision, ReactDecision):
            await self._react(turn, prepared, decision)
        elif isinstance(decision, PokeDecision):
            await self._poke(turn, decision)
        return TurnDecision.DONE

    async def _reply(
        self,
        turn: Turn,
        prepared: PreparedTurn,
        decision: ReplyDecision,
        choices: Mapping[str, Any],
    ) -> None:
        intents = decision.reply.intents
        await self._hear(turn, intents, choices)
        target = answered_line(prepared, decision.target)
        newest = await newest_message_id(self._deps.engine, turn.stream_id)
        quote = None
        if target is not None and should_quote(turn.stream.kind, target.message_id, newest):
            quote = target.platform_message_id
        context = FormContext(turn, intents, choices, self._deps.clock())
        shape = await apply_forms(self._deps.forms, ReplyShape(decision.reply.bubbles), context)
        for event in shape.events:
            self._event(turn, event.kind, event.reason, dict(event.payload))
        if shape.empty:  # a sticker-only reply with no sticker to send: its words, then
            shape = ReplyShape(tuple(i.value for i in intents if i.value)[:1])
        await self._deliver(turn, shape, quote)

    async def _hear(
        self, turn: Turn, intents: Sequence[Intent], choices: Mapping[str, Any]
    ) -> None:
        for intent in intents:
            self._event(turn, EventKind.REPLY_INTENT, intent.kind.value, {"value": intent.value})
        if intents:
            context = FormContext(turn, tuple(intents), choices, self._deps.clock())
            await tell_listeners(self._deps.listeners, context)

    async def _deliver(self, turn: Turn, shape: ReplyShape, quote: str | None) -> None:
        if shape.empty:
            return
        reply = OutgoingReply(
            turn.turn_id,
            turn.stream_id,
            turn.stream,
            shape.bubbles,
            quote,
            turn.disposition.is_direct_call,
            shape.media,
            origin=_origin(turn),
        )
        report = await self._deps.delivery.deliver(reply)
        payload = {"bubbles": list(reply.texts), "outbox_ids": list(report.queued), "quote": quote}
        self._event(turn, EventKind.REPLY_QUEUED, "", payload)

    async def _react(self, turn: Turn, prepared: PreparedTurn, decision: ReactDecision) -> None:
        line = prepared.line(decision.message_id)
        assert line is not None  # validated against the frame, which holds only batch lines
        await self._queue_action(turn, Reaction(line.platform_message_id, decision.reaction))

    async def _poke(self, turn: Turn, decision: PokeDecision) -> None:
        await self._queue_action(turn, Poke(decision.user_id))

    async def _queue_action(self, turn: Turn, action: ChatAction) -> None:
        kind, payload = action.kind.value, action.to_payload()
        try:
            ids = await self._deps.delivery.act(
                turn.turn_id, turn.stream_id, action, origin=_origin(turn),
                account=turn.stream.self_id,
            )
        except PayloadError as exc:  # a reaction to a poke's line, say: nothing to send
            logger.warning("turn {}: {} not queued: {}", turn.turn_id, kind, exc)
            self._event(turn, EventKind.ACTION_REFUSED, kind, {**payload, "error": str(exc)})
            return
        self._event(turn, EventKind.ACTION_QUEUED, kind, {**payload, "outbox_ids": list(ids)})

    async def _failed(
        self, turn: Turn, outcome: AgentOutcome, config: AgentConfig
    ) -> TurnDecision:
        assert outcome.failure is not None
        self._event(turn, EventKind.AGENT_FAILED, outcome.failure.value, _decision_payload(outcome))
        # Past the cap every turn fails alike until midnight: the cap itself was said once.
        level = "INFO" if outcome.failure is FailureReason.BUDGET_REACHED else "WARNING"
        logger.log(level, "turn {} failed: {} ({})", turn.turn_id, outcome.failure, outcome.detail)
        if outcome.failure is FailureReason.BUDGET_REACHED:
            await self._budget_spent(turn)
        elif outcome.failure in _NO_ANSWER:
            return await self._no_answer(turn, outcome.detail, config)
        return TurnDecision.DONE

    async def _budget_spent(self, turn: Turn) -> None:
        """A direct call once today's budget is spent hears so, once a chat and day."""
        notices = self._deps.notices
        if turn.disposition.outcome is not Outcome.FORCE or notices is None:
            return
        day = day_of(self._deps.clock()).isoformat()
        await notices.send(
            OutgoingMessage(
                turn.turn_id,
                turn.stream_id,
                (Segment(SegmentKind.TEXT, text=CHAT_NOTICE),),
                key=f"budget-chat:{day}:{turn.stream_id}",
                origin=Origin.RESPONDER,
                account=turn.stream.self_id,
            )
        )

    async def _no_answer(self, turn: Turn, detail: str, config: AgentConfig) -> TurnDecision:
        """No model could answer: a must-answer turn records it (and may say the fallback)."""
        if turn.disposition.outcome is not Outcome.FORCE:
            return TurnDecision.DONE
        fallback = config.fallback_reply.strip()  # the limits the turn started with
        self._event(
            turn,
            EventKind.MODEL_UNAVAILABLE,
            "",
            {"detail": detail[:500], "fallback": bool(fallback)},
        )
        if fallback:
            await self._deliver(turn, ReplyShape((fallback,)), None)
        return TurnDecision.DONE

    def _event(self, turn: Turn, kind: EventKind, reason: str, payload: dict[str, Any]) -> None:
        self._deps.ledger.record(
            LedgerEvent(
                kind=kind,
                stream_id=turn.stream_id,
                reason=reason,
                turn_id=turn.turn_id,
                message_id=turn.watermark,
                payload=payload,
            )
        )


def build_frame(
    turn: Turn,
    prepared: PreparedTurn,
    capabilities: frozenset[Capability],
    config: AgentConfig,
    bot_names: tuple[str, ...],
) -> DecisionFrame:
    inputs = FrameInputs(
        kind=turn.stream.kind,
        forced=prepared.forced,
        may_wait=turn.may_wait,
        capabilities=capabilities,
        proactive=turn.proactive,
    )
    batch = prepared.batch
    return DecisionFrame(
        selectable=tuple(line.message_id for line in batch if line.message_id <= turn.watermark),
        selectable_users=tuple(dict.fromkeys(line.user_id for line in batch if not line.from_bot)),
        watermark=turn.watermark,
        actions=available_actions(inputs),
        forced=prepared.forced,
        tool_calls_left=config.tool_call_budget,
        bot_names=bot_names,
        max_bubbles=config.max_bubbles,
        max_chars=config.reply_max_chars,
    )


def answered_line(prepared: PreparedTurn, target: int | None) -> ContextLine | None:
    """The message a reply answers: the model's target, else the batch's newest message
    (models mostly leave the optional target out; code, not the model, decides quotes)."""
    if target is not None:
        return prepared.line(target)
    batch = prepared.batch
    return batch[-1] if batch else None


def _assembly_payload(prepared: PreparedTurn) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "lines": len(prepared.lines),
        "batch": list(prepared.batch_ids),
        "dropped_lines": prepared.dropped_lines,
        "blocks": [block.source for block in prepared.blocks if block.text],
        "sources": {block.source: dict(block.trace) for block in prepared.blocks if block.trace},
        "dropped_blocks": prepared.dropped_blocks,
        "forced": prepared.forced,
    }
    if prepared.preparations:
        payload["prepared"] = {name: dict(t) for name, t in prepared.preparations.items()}
    return payload


def _origin(turn: Turn) -> Origin:
    return Origin.PROACTIVE if turn.proactive else Origin.AGENT_REPLY


def _action_name(outcome: AgentOutcome) -> str:
    names = {
        ReplyDecision: "reply",
        SilentDecision: "silent",
        WaitDecision: "wait",
        ReactDecision: "react",
        PokeDecision: "poke",
    }
    return names[type(outcome.decision)]  # type: ignore[index]


def _decision_payload(outcome: AgentOutcome) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "models": outcome.models,
        "rounds": outcome.rounds,
        "cost": round(outcome.cost, 8),
        "prompt_tokens": outcome.prompt_tokens,
        "completion_tokens": outcome.completion_tokens,
        "repairs": outcome.repairs,
        "lookups": outcome.lookups,
    }
    if outcome.detail:
        payload["detail"] = outcome.detail[:500]
    decision = outcome.decision
    if isinstance(decision, SilentDecision):
        payload["reason"] = decision.reason
    elif isinstance(decision, ReplyDecision):
        payload["target"] = decision.target
        payload["removed"] = list(decision.reply.removed)
    elif isinstance(decision, WaitDecision):
        payload["seconds"] = decision.seconds
    return payload
