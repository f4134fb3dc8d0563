"""Turns the bot starts itself: a follow-up after a private reply, a promise come due.

  a job fires -> claim the stream as `proactive` (a reply turn holding it wins: busy)
  -> a Turn with no new messages, the occasion's hint, the stream's newest line as watermark
  -> turn_started (reason `proactive`), then the same handler, outbox and observers as a
     reply turn; the agent may reply or stay silent, nothing else

The jobs that start these turns run at most once (max_attempts 1): after a crash a missed
follow-up is better than a doubled one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKey
from pallas.product.conversation.gate.facts import MessageFacts
from pallas.product.conversation.gate.gate import Disposition, Outcome, Reason
from pallas.product.conversation.gate.trigger import SpeakTrigger, timeline_size
from pallas.product.conversation.turns.buffers import TurnBuffers, TurnSource
from pallas.product.conversation.turns.runner import RunnerDeps, hand_over
from pallas.product.conversation.turns.turn import Occasion, Turn, TurnDecision
from pallas.store.audit import EventKind
from pallas.store.conversation import newest_message_id, stream_key
from pallas.store.ledger import LedgerEvent

PROACTIVE_DISPOSITION = Disposition(Outcome.DELIBERATE, Reason.PROACTIVE)


class ProactiveOutcome(StrEnum):
    RAN = "ran"  # the turn ran (whatever the agent decided)
    BUSY = "busy"  # a turn already holds the chat
    GONE = "gone"  # no such chat, or nothing said in it yet


@dataclass(frozen=True)
class ProactiveResult:
    outcome: ProactiveOutcome
    decision: TurnDecision | None = None
    turn_id: int | None = None


SpeakingAs = Callable[[int, StreamKey], Awaitable[StreamKey]]


async def as_stored(stream_id: int, stream: StreamKey) -> StreamKey:
    return stream


class ProactiveTurns:
    def __init__(
        self,
        engine: AsyncEngine,
        buffers: TurnBuffers,
        runner: RunnerDeps,
        speaking_as: SpeakingAs = as_stored,
    ) -> None:
        self._engine = engine
        self._buffers = buffers
        self._runner = runner
        # The account a turn of the bot's own speaks as: a group's speaker (docs/accounts.md).
        self._speaking_as = speaking_as

    async def start(self, stream_id: int, occasion: Occasion) -> ProactiveResult:
        """Run one turn of the bot's own in `stream_id`, unless the chat is busy."""
        if not self._buffers.try_claim(stream_id, TurnSource.PROACTIVE):
            return ProactiveResult(ProactiveOutcome.BUSY)
        try:
            if not await self._buffers.take_chat(stream_id):  # another process's turn
                return ProactiveResult(ProactiveOutcome.BUSY)
            try:
                return await self._run(stream_id, occasion)
            finally:
                await self._buffers.release_chat(stream_id)
        finally:
            self._buffers.release(stream_id)

    async def _run(self, stream_id: int, occasion: Occasion) -> ProactiveResult:
        stream = await stream_key(self._engine, stream_id)
        watermark = await newest_message_id(self._engine, stream_id)
        if stream is None or not watermark:  # a chat with nothing said has nothing to go on
            logger.warning("proactive turn for unknown chat {} ({})", stream_id, occasion.reason)
            return ProactiveResult(ProactiveOutcome.GONE)
        stream = await self._speaking_as(stream_id, stream)
        deps = self._runner
        turn = Turn(
            turn_id=deps.turn_ids.next(),
            stream_id=stream_id,
            stream=stream,
            messages=(),
            text="",
            facts=MessageFacts(),
            disposition=PROACTIVE_DISPOSITION,
            trigger=SpeakTrigger.AMBIENT,
            timeline_size=timeline_size(SpeakTrigger.TO_ME),
            may_wait=False,
            watermark=watermark,
            occasion=occasion,
        )
        await deps.ledger.write(_started(turn, occasion, deps.holder))
        activity = await deps.activity(stream_id, stream.self_id, deps.clock())
        decision = await hand_over(turn, activity, deps)
        return ProactiveResult(ProactiveOutcome.RAN, decision, turn.turn_id)


def _started(turn: Turn, occasion: Occasion, holder: str | None) -> LedgerEvent:
    return LedgerEvent(
        EventKind.TURN_STARTED,
        turn.stream_id,
        reason=Reason.PROACTIVE.value,
        turn_id=turn.turn_id,
        message_id=turn.watermark,
        payload={
            "message_ids": [],
            "outcome": PROACTIVE_DISPOSITION.outcome.value,
            "signals": [],
            "trigger": turn.trigger.value,
            "timeline_size": turn.timeline_size,
            "occasion": occasion.reason,
            "key": occasion.key,
            **({"holder": holder} if holder else {}),
        },
    )
