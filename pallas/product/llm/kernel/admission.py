"""The ingress gate stage: every committed message gets a disposition and an audit event.

Drop means "seen, not answered": the message stays in the timeline and one `gate_dropped`
event (no turn id) says why. A message that passes goes to its stream's buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKind
from pallas.product.conversation.ingress import CONTINUE, StageResult, StoredMessage
from pallas.product.llm.kernel.activity import HORIZON, Sighting, StreamActivity
from pallas.product.llm.kernel.facts import (
    Asker,
    MessageFacts,
    count_pokes,
    gate_request,
    read_message,
)
from pallas.product.llm.kernel.gate import Disposition, decide_disposition
from pallas.product.llm.kernel.policy import GatePolicy, effective_policy
from pallas.product.llm.kernel.scheduler import Scheduler
from pallas.product.llm.kernel.trigger import classify_speak_trigger, lottery_roll
from pallas.product.llm.kernel.turn import Admitted
from pallas.store import kernel_state
from pallas.store.audit import EventKind
from pallas.store.ledger import LedgerEvent, LedgerWriter, SetFollowUpDeclined
from pallas.store.sql import BoundedCache

POLICY_TTL = timedelta(seconds=30)


class ActivityBook:
    """Per-stream activity views, loaded from the store on first sight, bounded in number."""

    def __init__(self, engine: AsyncEngine, capacity: int = 2_000) -> None:
        self._engine = engine
        self._views: BoundedCache[int, StreamActivity] = BoundedCache(capacity)

    def cached(self, stream_id: int) -> StreamActivity | None:
        return self._views.get(stream_id)

    async def get(self, stream_id: int, self_id: str, now: datetime) -> StreamActivity:
        view = self._views.get(stream_id)
        if view is None:
            view = await self._load(stream_id, self_id, now)
            self._views.put_all({stream_id: view})
        return view

    async def _load(self, stream_id: int, self_id: str, now: datetime) -> StreamActivity:
        since = now - HORIZON
        rows = await kernel_state.recent_rows(self._engine, stream_id, since)
        bot_ids = {r.platform_message_id for r in rows if r.from_bot}
        sightings = [
            Sighting(
                r.message_id,
                r.platform_message_id,
                r.person_id,
                r.stored_at,
                from_bot=r.from_bot,
                mentioned_me=self_id in r.mentions and not r.is_poke,
                poked_me=r.is_poke and self_id in r.mentions,
                replied_to_me=r.reply_to in bot_ids,
            )
            for r in rows
        ]
        return StreamActivity(
            sightings,
            await kernel_state.ambient_passes(self._engine, stream_id, since),
            await kernel_state.follow_up_declined(self._engine, stream_id),
        )


class PolicyBook:
    """Each group's effective policy: the defaults plus its stored overrides (cached briefly)."""

    def __init__(self, engine: AsyncEngine, defaults: GatePolicy) -> None:
        self._engine = engine
        self.defaults = defaults
        self._cache: BoundedCache[int, tuple[GatePolicy, datetime]] = BoundedCache(5_000)

    def cached(self, stream_id: int) -> GatePolicy:
        hit = self._cache.get(stream_id)
        return hit[0] if hit else self.defaults

    async def save(self, stream_id: int, overrides: dict[str, Any], now: datetime) -> GatePolicy:
        """Validate and store a group's overrides; they apply from the next message."""
        policy = self.defaults.with_overrides(overrides)  # raises on an invalid knob
        await kernel_state.save_policy_overrides(self._engine, stream_id, overrides, now)
        self._cache.put_all({stream_id: (policy, now)})
        return policy

    async def get(self, stream_id: int, now: datetime) -> GatePolicy:
        hit = self._cache.get(stream_id)
        if hit is not None and now - hit[1] < POLICY_TTL:
            return hit[0]
        overrides = await kernel_state.policy_overrides(self._engine, stream_id)
        policy, problem = effective_policy(self.defaults, overrides)
        if problem:
            logger.warning("stream {}: {}", stream_id, problem)
        self._cache.put_all({stream_id: (policy, now)})
        return policy


@dataclass
class AdmissionDeps:
    engine: AsyncEngine
    ledger: LedgerWriter
    scheduler: Scheduler
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
        deps.ledger.record(_gate_event(stored, facts, disposition, asleep=request.asleep))
        if disposition.passes:
            deps.scheduler.submit(
                Admitted(stored, facts, disposition), private=msg.stream.kind is StreamKind.PRIVATE
            )
        return CONTINUE

    async def on_own_message(self, stored: StoredMessage) -> None:
        """The bot spoke: the natural reply window opens again."""
        deps = self._deps
        now = deps.clock()
        activity = await deps.activities.get(stored.stream_id, stored.message.stream.self_id, now)
        activity.add(_sighting(stored, MessageFacts(), now, from_bot=True))
        if activity.follow_up_declined:
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
    stored: StoredMessage, facts: MessageFacts, now: datetime, from_bot: bool = False
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
    )


def _with_poke_count(facts: MessageFacts, pokes: int) -> MessageFacts:
    if not facts.is_poke:
        return facts
    return MessageFacts(**(facts.to_json() | {"pokes_in_window": pokes}))


def _gate_event(
    stored: StoredMessage, facts: MessageFacts, disposition: Disposition, *, asleep: bool
) -> LedgerEvent:
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
            "asleep": asleep,
        },
    )
