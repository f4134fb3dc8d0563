"""The audit ledger writer, and the few turn facts that are written with it.

Everything goes through one group commit, so a burst of gate decisions costs a handful of
transactions. `write` waits for the commit; `record` does not (a failure is logged);
`record_soon` does not either, and lets its ops wait up to RECORD_SOON_S for company, so that
at a slow, steady pace the gate's decisions do not cost a transaction each. Order is kept:
anything written or recorded after them commits with them or later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from loguru import logger
from sqlalchemy import bindparam, insert, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.store.audit import EventKind
from pallas.store.database import Database
from pallas.store.group_commit import GroupCommitter, WriterClosedError
from pallas.store.models import Event, Message, StreamState
from pallas.store.sql import upsert
from pallas.store.timeline import Clock, utc_now


@dataclass(frozen=True)
class LedgerEvent:
    kind: EventKind
    stream_id: int | None
    reason: str = ""
    turn_id: int | None = None
    person_id: int | None = None
    message_id: int | None = None
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ConsumeMessages:
    """A turn takes these messages (turn_id None: gives them back, still waiting)."""

    turn_id: int | None
    message_ids: tuple[int, ...]


@dataclass(frozen=True)
class SetFollowUpDeclined:
    stream_id: int
    declined: bool


@dataclass(frozen=True)
class SuppressMessage:
    """Flag a stored message as silenced: it stays in the timeline, nobody acts on it."""

    message_id: int


LedgerOp = LedgerEvent | ConsumeMessages | SetFollowUpDeclined | SuppressMessage


# How long `record_soon` ops may wait for others to share their transaction. A crash in that
# window loses them: only for facts whose loss start-up repairs (the gate re-decides a
# message that has no decision).
RECORD_SOON_S = 0.1


class LedgerWriter:
    def __init__(
        self,
        engine: AsyncEngine,
        *,
        clock: Clock = utc_now,
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._committer: GroupCommitter[LedgerOp, None] = GroupCommitter(
            "ledger writer",
            self._apply,
            patience_s=RECORD_SOON_S,
            writes=Database.of(engine).writes(),
        )
        self._background: set[asyncio.Future[None]] = set()

    def start(self) -> None:
        self._committer.start()

    async def close(self) -> None:
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        await self._committer.close()

    async def write(self, *ops: LedgerOp) -> None:
        """Commit the ops (together with whatever else is queued) and return."""
        await asyncio.gather(*(self._committer.submit(op) for op in ops))

    async def flush(self) -> None:
        """Wait until everything recorded so far is committed (or its failure logged)."""
        self._committer.hurry()
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    def record(self, *ops: LedgerOp) -> None:
        """Queue the ops without waiting; a failed commit is logged, never raised here."""
        self._queue(ops, patient=False)

    def record_soon(self, *ops: LedgerOp) -> None:
        """As `record`, but the ops may wait up to RECORD_SOON_S for company (see above)."""
        self._queue(ops, patient=True)

    def _queue(self, ops: Sequence[LedgerOp], *, patient: bool) -> None:
        for op in ops:
            try:
                future = self._committer.enqueue(op, patient=patient)
            except WriterClosedError as exc:
                logger.error("ledger record lost: {!r}", exc)
                continue
            self._background.add(future)
            future.add_done_callback(self._forget)

    def _forget(self, future: asyncio.Future[None]) -> None:
        self._background.discard(future)
        if not future.cancelled() and future.exception() is not None:
            logger.error("ledger record lost: {!r}", future.exception())

    async def _apply(self, ops: Sequence[LedgerOp]) -> list[None]:
        now = self._clock()
        async with self._engine.begin() as conn:
            await _apply_in(conn, ops, now)
        return [None] * len(ops)


async def _apply_in(conn: AsyncConnection, ops: Sequence[LedgerOp], now: Any) -> None:
    claims = [
        {"mid": mid, "tid": op.turn_id}
        for op in ops
        if isinstance(op, ConsumeMessages)
        for mid in op.message_ids
    ]
    if claims:  # one statement for every claim in the batch
        await conn.execute(_CLAIM, claims)
    suppressed = [op.message_id for op in ops if isinstance(op, SuppressMessage)]
    if suppressed:
        await conn.execute(
            update(Message).where(Message.id.in_(suppressed)).values(suppressed=True)
        )
    for op in ops:
        if isinstance(op, SetFollowUpDeclined):
            await conn.execute(
                upsert(
                    conn,
                    StreamState.__table__,
                    ["stream_id"],
                    {  # type: ignore[arg-type]
                        "stream_id": op.stream_id,
                        "follow_up_declined": op.declined,
                        "updated_at": now,
                    },
                )
            )
    events = [_event_row(op, now) for op in ops if isinstance(op, LedgerEvent)]
    if events:
        await conn.execute(insert(Event), events)


_CLAIM = (
    update(Message)
    .where(Message.id == bindparam("mid"))
    .values(turn_id=bindparam("tid"))
    .execution_options(synchronize_session=False)
)


def _event_row(op: LedgerEvent, now: Any) -> dict[str, Any]:
    return {
        "kind": op.kind,
        "turn_id": op.turn_id,
        "stream_id": op.stream_id,
        "person_id": op.person_id,
        "message_id": op.message_id,
        "reason": op.reason,
        "payload": op.payload,
        "created_at": now,
    }
