"""Retention in the store: rows older than a cutoff deleted in bounded batches (docs/retention.md).

Each batch is one short transaction taken under the write lock; the lock is released and the
event loop gets a turn between batches, so an ingress write waits behind at most one batch.
What a part of the bot still holds (`Holds`) is never deleted: a message kept as the evidence
of a memory, quoted by a reply still to be sent, or not yet read by a periodic scan.

A deleted message's ledger events stay as long as the ledger's own cutoff allows; their
`message_id` is cleared in the same transaction, so nothing points at a missing row.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import delete, literal, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.store.database import Database
from pallas.store.engine import backend_name
from pallas.store.models import (
    Event,
    LlmCall,
    Message,
    OutboxItem,
    Reply,
    ScanCursor,
    UtcDateTime,
)

OPEN_OUTBOX = ("pending", "sending")
BATCH_ROWS = 2000
BATCH_S = 0.1  # a batch holds the write lock about this long at most
MIN_BATCH_ROWS = 100


@dataclass(frozen=True)
class Holds:
    """What someone still needs of the timeline: these messages, the messages of these turns,
    and every message from `since` on (a reader that has not got there yet)."""

    message_ids: frozenset[int] = frozenset()
    turn_ids: frozenset[int] = frozenset()
    since: datetime | None = None

    def __or__(self, other: Holds) -> Holds:
        times = [t for t in (self.since, other.since) if t is not None]
        return Holds(
            self.message_ids | other.message_ids,
            self.turn_ids | other.turn_ids,
            min(times) if times else None,
        )

    def keeps(self, message_id: int, turn_id: int | None) -> bool:
        return message_id in self.message_ids or (turn_id is not None and turn_id in self.turn_ids)


@dataclass(frozen=True)
class Budget:
    """How a run deletes: at most `rows` a batch, fewer while a batch takes longer than
    `batch_s` (halved each time, down to `min_rows`; doubled again while well under it); the
    pause between batches; and when to stop starting them."""

    rows: int = BATCH_ROWS
    pause_s: float = 0.01
    spent: Callable[[], bool] = field(default=lambda: False)
    batch_s: float = BATCH_S
    min_rows: int = MIN_BATCH_ROWS

    def next_rows(self, rows: int, took_s: float) -> int:
        """The next batch's size after one of `rows` took `took_s` (pure)."""
        if took_s > self.batch_s:
            return max(min(self.min_rows, self.rows), rows // 2)
        if took_s < self.batch_s / 2:
            return min(self.rows, rows * 2)
        return rows


@dataclass(frozen=True)
class Pass:
    """One table's share of a run."""

    table: str
    deleted: int = 0
    batches: int = 0
    done: bool = True  # nothing older than the cutoff is left (False: the budget ran out)
    longest_batch_s: float = 0.0  # the longest a batch held the write lock


# A step deletes one batch of at most the rows it is given, in the transaction it is given:
# (rows deleted, whether more remain).
Step = Callable[[AsyncConnection, int], Awaitable[tuple[int, bool]]]


class RetentionStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._writes = Database.of(engine).writes()

    async def prune_messages(self, before: datetime, holds: Holds, budget: Budget) -> Pass:
        """Messages whose time is before `before` (and before `holds.since`), unless held.
        A row stored after `before` stays whatever time the platform gave it (a clock gone
        wrong must not make a fresh message look old)."""
        if holds.since is not None:
            before = min(before, holds.since)
        cursor: list[tuple[datetime, int]] = []

        async def step(conn: AsyncConnection, rows: int) -> tuple[int, bool]:
            query = select(Message.id, Message.time, Message.turn_id, Message.stored_at).where(
                Message.time < before
            )
            if cursor:  # held rows stay behind: resume after the last row looked at
                after = tuple_(literal(cursor[0][0], UtcDateTime()), literal(cursor[0][1]))
                query = query.where(tuple_(Message.time, Message.id) > after)
            query = query.order_by(Message.time, Message.id).limit(rows)
            found = (await conn.execute(query)).all()
            if found:
                cursor[:] = [(found[-1].time, found[-1].id)]
            ids = [
                row.id
                for row in found
                if row.stored_at < before and not holds.keeps(row.id, row.turn_id)
            ]
            if ids:
                await conn.execute(
                    update(Event).where(Event.message_id.in_(ids)).values(message_id=None)
                )
                await conn.execute(delete(Message).where(Message.id.in_(ids)))
            return len(ids), len(found) == rows

        return await self._batches("message", step, budget)

    async def prune_events(self, before: datetime, budget: Budget) -> Pass:
        """Ledger events created before `before`. They are appended with the time they were
        written, so in id order the old ones come first and the first young row ends the
        pass (a straggler behind it goes in a later run)."""
        after = [0]

        async def step(conn: AsyncConnection, rows: int) -> tuple[int, bool]:
            query = (
                select(Event.id, Event.created_at)
                .where(Event.id > after[0])
                .order_by(Event.id)
                .limit(rows)
            )
            found = (await conn.execute(query)).all()
            old = [row.id for row in found if row.created_at < before]
            if old:
                after[0] = old[-1]
                await conn.execute(delete(Event).where(Event.id.in_(old)))
            return len(old), len(found) == rows and len(old) == len(found)

        return await self._batches("event", step, budget)

    async def prune_model_calls(self, before: datetime, budget: Budget) -> Pass:
        async def step(conn: AsyncConnection, rows: int) -> tuple[int, bool]:
            query = (
                select(LlmCall.id)
                .where(LlmCall.created_at < before)
                .order_by(LlmCall.created_at)
                .limit(rows)
            )
            ids = list((await conn.execute(query)).scalars())
            if ids:
                await conn.execute(delete(LlmCall).where(LlmCall.id.in_(ids)))
            return len(ids), len(ids) == rows

        return await self._batches("llm_call", step, budget)

    async def prune_outbox(self, before: datetime, budget: Budget) -> Pass:
        """Settled outbox rows created before `before` and the reply records left without
        rows; a row still pending or sending is never touched, however old."""
        after = [0]

        async def step(conn: AsyncConnection, rows: int) -> tuple[int, bool]:
            query = (
                select(OutboxItem.id, OutboxItem.reply_id, OutboxItem.created_at, OutboxItem.status)
                .where(OutboxItem.id > after[0])
                .order_by(OutboxItem.id)
                .limit(rows)
            )
            found = (await conn.execute(query)).all()
            old = [row for row in found if row.created_at < before]
            young = len(old) < len(found)
            settled = [row for row in old if row.status not in OPEN_OUTBOX]
            if old:
                after[0] = old[-1].id
            if settled:
                await conn.execute(
                    delete(OutboxItem).where(OutboxItem.id.in_([row.id for row in settled]))
                )
                await _drop_orphan_replies(conn, {r.reply_id for r in settled if r.reply_id})
            return len(settled), len(found) == rows and not young

        return await self._batches("outbox", step, budget)

    async def optimize(self) -> None:
        """SQLite: refresh the planner's statistics where they went stale (cheap); the freed
        pages are reused by new rows, the file is not shrunk (docs/retention.md)."""
        if backend_name(self.engine) != "sqlite":
            return
        async with self._writes.begin() as conn:
            await conn.exec_driver_sql("PRAGMA optimize")

    async def _batches(self, table: str, step: Step, budget: Budget) -> Pass:
        deleted = batches = 0
        longest = 0.0
        rows = budget.rows
        while not budget.spent():
            async with self._writes.lock:
                started = time.perf_counter()
                async with self.engine.begin() as conn:
                    count, more = await step(conn, rows)
                took = time.perf_counter() - started
            longest = max(longest, took)
            rows = budget.next_rows(rows, took)
            batches += 1
            deleted += count
            if not more:
                return Pass(table, deleted, batches, True, longest)
            await asyncio.sleep(budget.pause_s)  # the lock is free: ingress goes first
        return Pass(table, deleted, batches, False, longest)


async def _drop_orphan_replies(conn: AsyncConnection, reply_ids: Iterable[int]) -> None:
    ids = list(reply_ids)
    if not ids:
        return
    still = select(OutboxItem.reply_id).where(OutboxItem.reply_id.in_(ids))
    kept = {int(r) for r in (await conn.execute(still)).scalars() if r is not None}
    gone = [reply_id for reply_id in ids if reply_id not in kept]
    if gone:
        await conn.execute(delete(Reply).where(Reply.id.in_(gone)))


# -- what the core holds -------------------------------------------------


async def outbox_holds(engine: AsyncEngine) -> Holds:
    """A reply still to be sent: the messages of its turn and the message it quotes."""
    open_rows = select(OutboxItem.turn_id, OutboxItem.reply_id).where(
        OutboxItem.status.in_(OPEN_OUTBOX)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(open_rows)).all()
        reply_ids = {row.reply_id for row in rows if row.reply_id is not None}
        quoted = select(Message.id).join(
            Reply,
            (Reply.stream_id == Message.stream_id) & (Reply.quote == Message.platform_message_id),
        )
        ids = set()
        if reply_ids:
            ids = set((await conn.execute(quoted.where(Reply.id.in_(reply_ids)))).scalars())
    turns = frozenset(int(row.turn_id) for row in rows if row.turn_id is not None)
    return Holds(frozenset(int(i) for i in ids), turns)


async def scan_holds(engine: AsyncEngine, name: str) -> Holds:
    """A periodic scan of the timeline (`scan_cursor`) still has to read what lies after its
    cursor; a scan that never ran holds nothing (it begins where the timeline then begins)."""
    query = select(ScanCursor.after_time).where(ScanCursor.name == name)
    async with engine.connect() as conn:
        after = (await conn.execute(query)).scalar()
    return Holds(since=after)
