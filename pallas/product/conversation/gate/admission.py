"""The ingress gate stage: every committed message gets a disposition and an audit event.

Drop means "seen, not answered": the message stays in the timeline and one `gate_dropped`
event (no turn id) says why. A message that passes goes to its stream's buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import counts_as_speaking
from pallas.core.inbound import StreamKind
from pallas.product.conversation.gate.activity import Sighting, StreamActivity
from pallas.product.conversation.gate.activity_book import ActivityBook
from pallas.product.conversation.gate.facts import (
    Asker,
    MessageFacts,
    count_pokes,
    gate_request,
    read_message,
)
from pallas.product.conversation.gate.gate import Disposition, GateRequest, decide_disposition
from pallas.product.conversation.gate.policy_book import PolicyBook
from pallas.product.conversation.gate.trigger import classify_speak_trigger, lottery_roll
from pallas.product.conversation.ingress import CONTINUE, StageResult, StoredMessage
from pallas.product.conversation.turns.buffers import TurnBuffers
from pallas.product.conversation.turns.turn import Admitted
from pallas.store import kernel_state
from pallas.store.audit import EventKind
from pallas.store.ledger import LedgerEvent, LedgerWriter, SetFollowUpDeclined


@dataclass
class AdmissionDeps:
    engine: AsyncEngine
    ledger: LedgerWriter
    turn_buffers: TurnBuffers
    activities: ActivityBook
    policies: PolicyBook
    names: Sequence[str]
    clock: Callable[[], datetime]
    lottery_seed: str


class Admission:
    """The gate, the last stage of the list: every message it sees gets one recorded
    disposition (`gate_passed` / `gate_dropped`), and what passes goes to the turn buffers."""

    name = "gate"

    def __init__(self, deps: AdmissionDeps) -> None:
        self._deps = deps

    async def on_message(self, stored: StoredMessage) -> StageResult:
        deps, msg = self._deps, stored.message
        now = deps.clock()
        activity = await deps.activities.get(stored.stream_id, msg.stream.self_id, now)
        policy = await deps.policies.get(stored.stream_id, now)
        facts = read_message(msg, deps.names, await self._replied_to_bot(stored, activity))
        activity.add(_sighting(stored, facts, now))
        facts = _with_poke_count(facts, count_pokes(activity, now, policy))
        asker = Asker(
            msg.stream.kind,
            stored.sender_person_id,
            stored.message_id,
            lottery_roll(deps.lottery_seed, stored.stream_id, stored.message_id),
        )
        request = gate_request(asker, facts, activity, policy, now)
        disposition = decide_disposition(request, policy)
        # The audit keeps what the gate saw, e.g. that a forced @ arrived during quiet hours.
        deps.ledger.record_soon(_gate_event(stored, facts, disposition, request, now))
        if disposition.passes:
            deps.turn_buffers.submit(
                Admitted(stored, facts, disposition), private=msg.stream.kind is StreamKind.PRIVATE
            )
        return CONTINUE

    async def on_own_message(self, stored: StoredMessage) -> None:
        """The bot spoke: the natural reply window opens again, unless what it sent was not
        talk (a command's answer, a welcome: see core.actions.CONVERSATIONAL)."""
        deps = self._deps
        now = deps.clock()
        activity = await deps.activities.get(stored.stream_id, stored.message.stream.self_id, now)
        speaking = counts_as_speaking(stored.message.origin)
        # Kept either way: a reply to a command's answer still calls the bot directly.
        activity.add(_sighting(stored, MessageFacts(), now, from_bot=True, speaking=speaking))
        if speaking and activity.follow_up_declined:
            activity.follow_up_declined = False
            deps.ledger.record(SetFollowUpDeclined(stored.stream_id, False))

    async def _replied_to_bot(self, stored: StoredMessage, activity: StreamActivity) -> bool:
        target = stored.message.reply_to
        if target is None:
            return False
        in_view = activity.is_bot_message(target)
        if in_view is not None:
            return in_view
        return await kernel_state.is_bot_message(self._deps.engine, stored.stream_id, target)


def _sighting(
    stored: StoredMessage,
    facts: MessageFacts,
    now: datetime,
    from_bot: bool = False,
    speaking: bool = True,
) -> Sighting:
    return Sighting(
        stored.message_id,
        stored.message.platform_message_id,
        stored.sender_person_id,
        now,
        from_bot=from_bot,
        mentioned_me=facts.mentioned_me,
        poked_me=facts.poked_me,
        replied_to_me=facts.replied_to_me,
        speaking=speaking,
    )


def _with_poke_count(facts: MessageFacts, pokes: int) -> MessageFacts:
    if not facts.is_poke:
        return facts
    return MessageFacts(**(facts.to_json() | {"pokes_in_window": pokes}))


def _gate_event(
    stored: StoredMessage,
    facts: MessageFacts,
    disposition: Disposition,
    request: GateRequest,
    now: datetime,
) -> LedgerEvent:
    """The decision and what it was made on: the facts, the moment and whether the bot had
    just declined to follow up are what a replay of the day needs (docs/cost.md)."""
    trigger = classify_speak_trigger(disposition, facts.opens_with_name)
    return LedgerEvent(
        EventKind.GATE_PASSED if disposition.passes else EventKind.GATE_DROPPED,
        stored.stream_id,
        reason=disposition.reason.value,
        person_id=stored.sender_person_id,
        message_id=stored.message_id,
        payload={
            "stage": "ingress",
            "outcome": disposition.outcome.value,
            "reason": disposition.reason.value,
            "signals": sorted(disposition.signals),
            "trigger": trigger.value if disposition.passes else None,
            "facts": facts.to_json(),
            "asleep": request.asleep,
            "at": now.isoformat(),
            "declined": request.follow_up_declined,
            # The account that answers it: a re-buffered message keeps it across a restart.
            "account": stored.message.stream.self_id,
        },
    )
