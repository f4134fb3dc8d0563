"""Start-up: every message the gate let through ends in one recorded outcome, across a crash.

A crash can cut the path of a message at any instruction. What the store holds afterwards
says where it was cut, and this module finishes each case before anything new runs:

- a turn that started and has no ending: if it queued a reply (the outbox rows are
  committed), it finished; if the agent had decided on silence, it was silent; if the batch
  gate had dropped it, it was dropped; otherwise it was interrupted (`turn_interrupted`):
  a direct call younger than the re-buffer window is run once more (`retry`: its messages
  are given back), anything else is given up (`given_up`);
- a retry mark no later turn followed (the process stopped again before the retried turn
  took its messages, or before the give-back itself committed): it is owed, found again
  from the store at every start until a turn takes its messages or it is given up. While
  its newest message is younger than the re-buffer window it runs (its messages are given
  back and re-buffered); after that each of them ends with `turn_interrupted` `given_up`
  (no turn id, `retry_of`: the marked turn). A message runs again at most once: a retried
  turn cut off again is given up;
- messages that passed the gate and no turn took: re-buffered when fresh
  (rebuffer.py), dropped as `stale_at_restart` when older;
- messages stored with no gate decision at all (the process stopped between the commit and
  the gate's event): gated now when fresh, dropped as `stale_at_restart` when older.

Recovery events carry `recovered: true` in their payload.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.gate.gate import Disposition, Outcome, Reason, Signal
from pallas.product.conversation.ingress import NextStage, StoredMessage
from pallas.product.conversation.turns.buffers import TurnBuffers
from pallas.product.conversation.turns.rebuffer import rebuffer_unconsumed
from pallas.store import kernel_state
from pallas.store.audit import EventKind
from pallas.store.kernel_state import RECOVERY_HORIZON, RetryMark, StartedTurn
from pallas.store.ledger import ConsumeMessages, LedgerEvent, LedgerWriter
from pallas.store.processes import EVERYONE, Owners

STALE_REASON = "stale_at_restart"
_SIGNALS = frozenset(signal.value for signal in Signal)


@dataclass
class RecoveryDeps:
    engine: AsyncEngine
    ledger: LedgerWriter
    turn_buffers: TurnBuffers
    gate: NextStage  # the stage list: decides on a message (the gate buffers what passes)
    window: timedelta  # fresher than this is still worth answering
    clock: Callable[[], datetime]
    # Whose leftovers: everyone's when alone on the store; else this process's own, or a
    # dead one's it took over (docs/scaling.md).
    owners: Owners = EVERYONE


@dataclass(frozen=True)
class RecoveryReport:
    interrupted: int = 0
    retried: int = 0
    closed: int = 0  # turns found finished, silent, waiting or dropped, their ending lost
    owed_retries: int = 0  # messages given back by a retry mark, re-buffered now
    retries_given_up: int = 0  # messages whose owed retry was too old to run
    rebuffered: int = 0
    regated: int = 0
    stale: int = 0


async def recover_kernel(deps: RecoveryDeps) -> RecoveryReport:
    now = deps.clock()
    endings = [await _end_turn(turn, deps, now) for turn in await _unfinished(deps, now)]
    owed, given_up = await _settle_owed_retries(deps, now)
    rebuffered = await rebuffer_unconsumed(
        deps.engine,
        deps.turn_buffers,
        now - deps.window,
        owed=owed,
        horizon=now - RECOVERY_HORIZON,
        owners=deps.owners,
    )
    stale = await _drop_stale_admitted(deps, now, owed)
    regated, stale_ungated = await _gate_ungated(deps, now)
    report = RecoveryReport(
        interrupted=endings.count("given_up") + endings.count("retry"),
        retried=endings.count("retry"),
        closed=sum(e not in ("given_up", "retry") for e in endings),
        owed_retries=len(owed),
        retries_given_up=given_up,
        rebuffered=rebuffered,
        regated=regated,
        stale=stale + stale_ungated,
    )
    if report != RecoveryReport():
        logger.warning("start-up recovery: {}", report)
    return report


async def _unfinished(deps: RecoveryDeps, now: datetime) -> list[StartedTurn]:
    return await kernel_state.unfinished_turns(deps.engine, now - RECOVERY_HORIZON, deps.owners)


async def _end_turn(turn: StartedTurn, deps: RecoveryDeps, now: datetime) -> str:
    """Record the ending the crash cut off; the ending's name."""
    has_outbox, decision = await kernel_state.turn_traces(deps.engine, turn.turn_id)
    ids = tuple(int(i) for i in turn.payload.get("message_ids", []))
    if turn.payload.get("outcome") == Outcome.DROP.value:
        await deps.ledger.write(_batch_dropped(turn))
        return "dropped"
    if decision == "wait" and not has_outbox:
        # Cut between giving the batch back and saying so: it waits, as it chose to.
        waiting = _event(turn, EventKind.TURN_WAITING, "")
        await deps.ledger.write(ConsumeMessages(None, ids), waiting)
        return "waiting"
    if has_outbox or decision == "silent":
        reason = "silent" if decision == "silent" and not has_outbox else "done"
        await deps.ledger.write(_event(turn, EventKind.TURN_FINISHED, reason))
        return reason
    retry = (
        _is_direct_call(turn)
        and turn.created_at >= now - deps.window
        and worth_retrying(
            await kernel_state.newest_stored_at(deps.engine, list(ids)), now, deps.window
        )
        and not await kernel_state.retried_before(
            deps.engine, list(ids), now - RECOVERY_HORIZON, turn.stream_id
        )
    )
    ending = "retry" if retry else "given_up"
    interrupted = _event(turn, EventKind.TURN_INTERRUPTED, ending, {"message_ids": list(ids)})
    if retry:  # the messages are given back; the owed retry below re-buffers them
        await deps.ledger.write(ConsumeMessages(None, ids), interrupted)
    else:
        await deps.ledger.write(interrupted)
    return ending


def _is_direct_call(turn: StartedTurn) -> bool:
    signals = frozenset(Signal(s) for s in turn.payload.get("signals", []) if s in _SIGNALS)
    outcome = Outcome(turn.payload.get("outcome", Outcome.DELIBERATE.value))
    return Disposition(outcome, Reason.ATTENTION, signals).is_direct_call


def worth_retrying(newest_stored_at: datetime | None, now: datetime, window: timedelta) -> bool:
    """A batch cut off by a crash runs again only while its newest message is as fresh as a
    re-buffered one must be; after that nobody waits for the answer any more."""
    return newest_stored_at is not None and newest_stored_at >= now - window


async def _settle_owed_retries(deps: RecoveryDeps, now: datetime) -> tuple[frozenset[int], int]:
    """The messages owed a retry that run now, and how many owed ones were given up."""
    run: set[int] = set()
    given_up = 0
    horizon = now - RECOVERY_HORIZON
    for owed in await kernel_state.owed_retries(deps.engine, horizon, deps.owners):
        if worth_retrying(owed.newest_stored_at, now, deps.window):
            run.update(owed.message_ids)
            continue
        await deps.ledger.write(*(_retry_given_up(owed.mark, mid) for mid in owed.message_ids))
        given_up += len(owed.message_ids)
    if run:  # the crash may have cut the give-back itself: give them back (again)
        await deps.ledger.write(ConsumeMessages(None, tuple(sorted(run))))
        logger.info("{} message(s) owed a retry run now", len(run))
    return frozenset(run), given_up


def _retry_given_up(mark: RetryMark, message_id: int) -> LedgerEvent:
    return LedgerEvent(
        EventKind.TURN_INTERRUPTED,
        mark.stream_id,
        reason="given_up",
        message_id=message_id,
        payload={"stage": "restart", "retry_of": mark.turn_id, "recovered": True},
    )


async def _drop_stale_admitted(
    deps: RecoveryDeps, now: datetime, owed: frozenset[int] = frozenset()
) -> int:
    """Passed the gate, never taken by a turn, too old to answer now, and owed no retry."""
    rows = await kernel_state.unconsumed_admitted(
        deps.engine, now - RECOVERY_HORIZON, until=now - deps.window, owed=owed,
        owners=deps.owners,
    )  # fmt: skip
    await deps.ledger.write(*(_stale(row.stream_id, row.person_id, row.message_id) for row in rows))
    return len(rows)


async def _gate_ungated(deps: RecoveryDeps, now: datetime) -> tuple[int, int]:
    """Stored, but the process stopped before the gate's event was written."""
    fresh = stale = 0
    since = now - RECOVERY_HORIZON
    for row in await kernel_state.ungated_messages(deps.engine, since, deps.owners):
        if row.stored_at is not None and row.stored_at >= now - deps.window:
            stored = StoredMessage(row.message_id, row.stream_id, row.person_id, row.message)
            await deps.gate.on_message(stored)
            fresh += 1
        else:
            await deps.ledger.write(_stale(row.stream_id, row.person_id, row.message_id))
            stale += 1
    await deps.ledger.flush()
    return fresh, stale


def _event(
    turn: StartedTurn, kind: str, reason: str, extra: dict[str, object] | None = None
) -> LedgerEvent:
    return LedgerEvent(
        kind,
        turn.stream_id,
        reason=reason,
        turn_id=turn.turn_id,
        message_id=turn.message_id,
        payload={"recovered": True, **(extra or {})},
    )


def _batch_dropped(turn: StartedTurn) -> LedgerEvent:
    return _event(
        turn,
        EventKind.GATE_DROPPED,
        turn.reason or Reason.ATTENTION_FILTERED.value,
        {"stage": "batch", "message_ids": turn.payload.get("message_ids", [])},
    )


def _stale(stream_id: int, person_id: int, message_id: int) -> LedgerEvent:
    return LedgerEvent(
        EventKind.GATE_DROPPED,
        stream_id,
        reason=STALE_REASON,
        person_id=person_id,
        message_id=message_id,
        payload={"stage": "restart", "recovered": True},
    )
