"""One turn, start to end: claim the batch's messages, gate the batch again, hand it over.

Reads like the turn in docs/architecture.md; each step is one function.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from loguru import logger

from pallas.core.inbound import StreamKey, StreamKind
from pallas.product.conversation.gate.activity import StreamActivity
from pallas.product.conversation.gate.facts import Asker, gate_request, merge_facts
from pallas.product.conversation.gate.gate import Disposition, Reason, decide_disposition
from pallas.product.conversation.gate.policy import GatePolicy
from pallas.product.conversation.gate.trigger import (
    classify_speak_trigger,
    lottery_roll,
    timeline_size,
)
from pallas.product.conversation.processes.lease import LeaseNotCurrent
from pallas.product.conversation.turns.buffers import Batch
from pallas.product.conversation.turns.observers import TurnEnded, TurnEnding, TurnObservers
from pallas.product.conversation.turns.turn import Turn, TurnDecision, TurnHandler
from pallas.store.audit import EventKind
from pallas.store.ledger import ConsumeMessages, LedgerEvent, LedgerWriter, SetFollowUpDeclined


async def _none_queued(stream_id: int) -> int:
    return 0


async def _always() -> bool:
    return True


class TurnIds:
    """Monotonic across restarts: seeded from the largest turn id the store has seen. On a
    store several processes share, each numbers its turns from blocks the store hands out
    (`IdBlocks`): unique across processes, monotonic within one."""

    def __init__(
        self, last: int, end: int | None = None, refill: TakeBlock | None = None
    ) -> None:
        self._last = last
        self._end = end  # the block's last number; None: no block, count on
        self._refill = refill
        self._next_block: asyncio.Task[range] | None = None

    def next(self) -> int:
        if self._end is not None and self._last >= self._end:
            self._switch_block()
        self._last += 1
        self._ask_early()
        return self._last

    def _ask_early(self) -> None:
        """Four fifths used: ask for the next block while this one lasts."""
        task = self._next_block
        if task is not None and task.done() and task.exception() is not None:
            self._next_block = None  # the store was away: asked again now
        if self._refill is None or self._end is None or self._next_block is not None:
            return
        if self._end - self._last < BLOCK_SIZE // 5:
            self._next_block = asyncio.get_running_loop().create_task(self._refill())

    def _switch_block(self) -> None:
        task = self._next_block
        if task is None or not task.done() or task.exception() is not None:
            self._ask_early()
            raise RuntimeError("no turn ids left: the next block was not taken in time")
        block = task.result()
        self._last, self._end, self._next_block = block.start - 1, block[-1], None


BLOCK_SIZE = 1_000_000
TakeBlock = Callable[[], Awaitable[range]]


@dataclass
class RunnerDeps:
    ledger: LedgerWriter
    handler: TurnHandler
    turn_ids: TurnIds
    # The stream's activity view and policy, loaded from the store when not cached (after a
    # restart, re-buffered batches are judged on the stream as the store remembers it).
    activity: Callable[[int, str, datetime], Awaitable[StreamActivity]]
    policy: Callable[[int, datetime], Awaitable[GatePolicy]]
    clock: Callable[[], datetime]
    lottery_seed: str
    # The chat's bubbles queued but not yet sent (the outbox): the frequency cap counts them.
    queued_replies: Callable[[int], Awaitable[int]] = field(default=_none_queued)
    observers: TurnObservers = field(default_factory=TurnObservers)
    holder: str | None = None  # this process's name, on its turns' start (docs/scaling.md)
    # Whether this process's lease is current: a turn consumes its messages only then.
    may_act: Callable[[], Awaitable[bool]] = field(default=_always)


async def run_turn(batch: Batch, deps: RunnerDeps) -> TurnDecision:
    turn_id = deps.turn_ids.next()
    now = deps.clock()
    activity = await deps.activity(
        batch.stream_id, batch.items[0].stored.message.stream.self_id, now
    )
    policy = await deps.policy(batch.stream_id, now)
    queued = await deps.queued_replies(batch.stream_id)
    disposition = gate_batch(batch, activity, policy, now, deps.lottery_seed, queued)
    turn = build_turn(turn_id, batch, disposition)
    await claim_messages(turn, deps)
    if not disposition.passes:
        deps.ledger.record(_dropped(turn))
        _tell_observers(turn, TurnEnding.DROPPED, deps)
        return TurnDecision.DONE
    if disposition.reason is Reason.AMBIENT:
        activity.add_ambient_turn(now)
    return await hand_over(turn, activity, deps)


def gate_batch(
    batch: Batch,
    activity: StreamActivity,
    policy: GatePolicy,
    now: datetime,
    lottery_seed: str,
    queued_replies: int = 0,
) -> Disposition:
    """The same gate, on the merged batch and the stream as it is now."""
    first = batch.items[0]
    facts = merge_facts(item.facts for item in batch.items)
    asker = Asker(
        kind=first.stored.message.stream.kind,
        person_id=first.sender_person_id,
        message_id=batch.items[-1].message_id,
        ambient_roll=lottery_roll(lottery_seed, batch.stream_id, first.message_id),
    )
    request = gate_request(asker, facts, activity, policy, now, queued_replies)
    return decide_disposition(request, policy)


def answering_stream(batch: Batch) -> StreamKey:
    """The chat as the account that answers the batch names it: the one the latest direct
    call went to (an @, its name, a reply to it), else the one the latest message went to
    (several accounts in one group: docs/accounts.md)."""
    direct = [
        item for item in batch.items
        if item.facts.mentioned_me or item.facts.called_by_name or item.facts.replied_to_me
        or item.facts.poked_me
    ]  # fmt: skip
    return (direct or batch.items)[-1].stored.message.stream


def build_turn(turn_id: int, batch: Batch, disposition: Disposition) -> Turn:
    facts = merge_facts(item.facts for item in batch.items)
    trigger = classify_speak_trigger(disposition, facts.opens_with_name)
    messages = tuple(item.stored for item in batch.items)
    stream = answering_stream(batch)
    return Turn(
        turn_id=turn_id,
        stream_id=batch.stream_id,
        stream=stream,
        messages=messages,
        text="\n".join(m.message.text for m in messages),
        facts=facts,
        disposition=disposition,
        trigger=trigger,
        timeline_size=timeline_size(trigger),
        # A private chat that already waited is re-opened without `wait`.
        may_wait=batch.may_wait,
        watermark=max(m.message_id for m in messages),
    )


async def claim_messages(turn: Turn, deps: RunnerDeps) -> None:
    """Committed before the handler runs: after a crash these messages are not re-run."""
    if not await deps.may_act():  # taken over since the chat was taken: not ours to run
        raise LeaseNotCurrent(f"turn {turn.turn_id}: the process's lease is not current")
    await deps.ledger.write(
        ConsumeMessages(turn.turn_id, tuple(m.message_id for m in turn.messages)),
        LedgerEvent(
            EventKind.TURN_STARTED,
            turn.stream_id,
            reason=turn.disposition.reason.value,
            turn_id=turn.turn_id,
            person_id=turn.messages[0].sender_person_id,
            message_id=turn.watermark,
            payload={
                "message_ids": [m.message_id for m in turn.messages],
                "outcome": turn.disposition.outcome.value,
                "signals": sorted(turn.disposition.signals),
                "trigger": turn.trigger.value,
                "timeline_size": turn.timeline_size,
                **({"holder": deps.holder} if deps.holder else {}),
            },
        ),
    )


async def hand_over(turn: Turn, activity: StreamActivity, deps: RunnerDeps) -> TurnDecision:
    try:
        decision = await deps.handler.handle(turn)
    except LeaseNotCurrent as exc:
        # Taken over mid-turn: no ending here, the turn is the taker's to end (and to run
        # once more, if it was a direct call).
        logger.warning("turn {}: {}", turn.turn_id, exc)
        return TurnDecision.DONE
    except Exception as exc:
        logger.opt(exception=exc).error("turn {} failed in its handler", turn.turn_id)
        deps.ledger.record(
            LedgerEvent(
                EventKind.TURN_FAILED,
                turn.stream_id,
                reason=type(exc).__name__,
                turn_id=turn.turn_id,
                payload={"error": repr(exc)[:500]},
            )
        )
        _tell_observers(turn, TurnEnding.FAILED, deps)
        return TurnDecision.DONE
    if decision is TurnDecision.WAIT and not turn.may_wait:
        logger.warning("turn {}: wait is not allowed for this batch; treated as done", turn.turn_id)
        decision = TurnDecision.DONE
    await _after(turn, decision, activity, deps)
    if decision is not TurnDecision.WAIT:
        ending = TurnEnding.SILENT if decision is TurnDecision.SILENT else TurnEnding.DONE
        _tell_observers(turn, ending, deps)
    return decision


def _tell_observers(turn: Turn, ending: TurnEnding, deps: RunnerDeps) -> None:
    ids = tuple(m.message_id for m in turn.messages)
    occasion = turn.occasion.reason if turn.occasion else ""
    deps.observers.notify(
        TurnEnded(turn.turn_id, turn.stream_id, turn.stream, ids, ending, deps.clock(), occasion)
    )


async def _after(
    turn: Turn, decision: TurnDecision, activity: StreamActivity, deps: RunnerDeps
) -> None:
    if decision is not TurnDecision.WAIT:
        deps.ledger.record(
            LedgerEvent(
                EventKind.TURN_FINISHED, turn.stream_id, reason=decision.value, turn_id=turn.turn_id
            )
        )
    if decision is TurnDecision.WAIT:
        # Not consumed after all: a restart while waiting re-buffers the batch.
        await deps.ledger.write(ConsumeMessages(None, tuple(m.message_id for m in turn.messages)))
        deps.ledger.record(
            LedgerEvent(EventKind.TURN_WAITING, turn.stream_id, turn_id=turn.turn_id)
        )
    elif (
        decision is TurnDecision.SILENT
        and turn.stream.kind is StreamKind.GROUP
        and not turn.proactive  # passing on its own idea is not declining anyone
    ):
        activity.follow_up_declined = True
        deps.ledger.record(SetFollowUpDeclined(turn.stream_id, True))


def _dropped(turn: Turn) -> LedgerEvent:
    return LedgerEvent(
        EventKind.GATE_DROPPED,
        turn.stream_id,
        reason=turn.disposition.reason.value,
        turn_id=turn.turn_id,
        person_id=turn.messages[0].sender_person_id,
        message_id=turn.watermark,
        payload={
            "stage": "batch",
            "signals": sorted(turn.disposition.signals),
            "message_ids": [m.message_id for m in turn.messages],
        },
    )
