"""Retention in the store, on SQLite and PostgreSQL: old rows go in bounded batches, new rows
and held rows stay, a deleted message's events lose only their pointer to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.memory.holds import memory_holds
from pallas.product.memory.tables import MemoryConsent, MemoryEntry
from pallas.store.audit_trail import explain, trace
from pallas.store.models import (
    Event,
    LlmCall,
    Message,
    OutboxItem,
    Reply,
    ScanCursor,
)
from pallas.store.retention import (
    Budget,
    Holds,
    RetentionStore,
    outbox_holds,
    scan_holds,
)
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import message

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OLD = NOW - timedelta(days=200)
CUTOFF = NOW - timedelta(days=180)


class Clock:
    def __init__(self) -> None:
        self.now = OLD

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def timeline(engine: AsyncEngine, clock: Clock) -> AsyncIterator[TimelineWriter]:
    writer = TimelineWriter(engine, clock=clock)
    writer.start()
    yield writer
    await writer.close()


async def say(writer: TimelineWriter, clock: Clock, at: datetime, text: str = "x") -> int:
    clock.now = at
    written = await writer.write(message(text, time=at))
    assert isinstance(written, MessageWritten)
    return written.message_id


async def ids(engine: AsyncEngine, column: Any) -> list[int]:
    async with engine.connect() as conn:
        return list((await conn.execute(select(column).order_by(column))).scalars())


async def add(engine: AsyncEngine, table: Any, **values: Any) -> int:
    async with engine.begin() as conn:
        result = await conn.execute(insert(table).values(**values))
    key = result.inserted_primary_key[0]
    return key if isinstance(key, int) else 0


async def test_old_messages_go_in_bounded_batches_and_held_ones_stay(
    engine: AsyncEngine, timeline: TimelineWriter, clock: Clock
) -> None:
    old = [await say(timeline, clock, OLD + timedelta(minutes=n)) for n in range(7)]
    new = [await say(timeline, clock, NOW - timedelta(days=1)) for _ in range(2)]
    async with engine.begin() as conn:
        await conn.execute(update(Message).where(Message.id == old[3]).values(turn_id=77))
    holds = Holds(message_ids=frozenset({old[1]}), turn_ids=frozenset({77}))
    store = RetentionStore(engine)
    done = await store.prune_messages(CUTOFF, holds, Budget(rows=2, pause_s=0))
    assert await ids(engine, Message.id) == [old[1], old[3], *new]
    # 7 old rows, 2 a batch: the fourth batch is short and ends the pass.
    assert (done.deleted, done.batches, done.done) == (5, 4, True)
    async with engine.connect() as conn:
        pointers = list((await conn.execute(select(Event.message_id))).scalars())
        events = await conn.scalar(select(func.count()).select_from(Event))
    assert events == 9  # each message's inbound event stays, with the ledger's own cutoff
    assert sorted(p for p in pointers if p is not None) == [old[1], old[3], *new]


async def test_a_pruned_message_is_gone_from_its_path_and_its_turn_still_traces(
    engine: AsyncEngine, timeline: TimelineWriter, clock: Clock
) -> None:
    old = await say(timeline, clock, OLD)
    async with engine.begin() as conn:
        await conn.execute(update(Message).where(Message.id == old).values(turn_id=31))
        await conn.execute(update(Event).where(Event.message_id == old).values(turn_id=31))
    assert await explain(engine, old) is not None
    await RetentionStore(engine).prune_messages(CUTOFF, Holds(), Budget(pause_s=0))
    assert await explain(engine, old) is None  # "no such message", as for any unknown id
    turn = await trace(engine, 31)
    assert [e.message_id for e in turn.events] == [None]  # the event stays, its pointer gone


async def test_everything_from_since_on_is_held(
    engine: AsyncEngine, timeline: TimelineWriter, clock: Clock
) -> None:
    first = await say(timeline, clock, OLD)
    second = await say(timeline, clock, OLD + timedelta(days=5))
    done = await RetentionStore(engine).prune_messages(
        CUTOFF, Holds(since=OLD + timedelta(days=1)), Budget(pause_s=0)
    )
    assert done.deleted == 1
    assert await ids(engine, Message.id) == [second]
    assert first not in await ids(engine, Message.id)


async def test_a_fresh_row_with_an_old_platform_time_stays(
    engine: AsyncEngine, timeline: TimelineWriter, clock: Clock
) -> None:
    clock.now = NOW  # stored now, though the platform says it was said 200 days ago
    written = await timeline.write(message("x", time=OLD))
    assert isinstance(written, MessageWritten)
    done = await RetentionStore(engine).prune_messages(CUTOFF, Holds(), Budget(pause_s=0))
    assert done.deleted == 0
    assert await ids(engine, Message.id) == [written.message_id]


async def test_a_spent_budget_stops_after_the_batch_in_progress(
    engine: AsyncEngine, timeline: TimelineWriter, clock: Clock
) -> None:
    for n in range(5):
        await say(timeline, clock, OLD + timedelta(minutes=n))
    batches: list[int] = []

    def spent() -> bool:
        batches.append(1)
        return len(batches) > 1

    done = await RetentionStore(engine).prune_messages(
        CUTOFF, Holds(), Budget(rows=2, pause_s=0, spent=spent)
    )
    assert (done.deleted, done.batches, done.done) == (2, 1, False)
    assert len(await ids(engine, Message.id)) == 3


async def test_events_go_in_id_order_up_to_the_first_batch_with_a_young_one(
    engine: AsyncEngine,
) -> None:
    times = [OLD, OLD, OLD, NOW, OLD, NOW, OLD]  # stragglers behind young rows
    for at in times:
        await add(engine, Event, kind="gate_dropped", payload={}, created_at=at)
    before = await ids(engine, Event.id)
    store = RetentionStore(engine)
    done = await store.prune_events(CUTOFF, Budget(rows=2, pause_s=0))
    # Batch one: two old rows. Batch two: an old row and a young one: the pass ends there.
    assert (done.deleted, done.batches, done.done) == (3, 2, True)
    assert await ids(engine, Event.id) == before[3:]
    again = await store.prune_events(CUTOFF, Budget(rows=2, pause_s=0))
    assert again.deleted == 1  # the young row leads the next run's first batch
    assert await ids(engine, Event.id) == [before[3], before[5], before[6]]


async def test_model_calls_before_the_cutoff_go(engine: AsyncEngine) -> None:
    for at in (OLD, NOW, OLD, OLD):
        await add(
            engine,
            LlmCall,
            created_at=at,
            purpose="chat",
            model_type="chat",
            model="m",
            upstream_model="m",
            provider="p",
            outcome="ok",
        )
    done = await RetentionStore(engine).prune_model_calls(CUTOFF, Budget(rows=2, pause_s=0))
    assert (done.deleted, done.batches) == (3, 2)
    async with engine.connect() as conn:
        left = list((await conn.execute(select(LlmCall.created_at))).scalars())
    assert left == [NOW]


async def outbox_row(
    engine: AsyncEngine,
    stream_id: int,
    status: str,
    at: datetime,
    reply_id: int | None = None,
    turn_id: int | None = None,
) -> int:
    return await add(
        engine,
        OutboxItem,
        reply_id=reply_id,
        turn_id=turn_id,
        stream_id=stream_id,
        kind="message",
        payload={},
        status=status,
        not_before=at,
        created_at=at,
        updated_at=at,
    )


async def reply(engine: AsyncEngine, stream_id: int, at: datetime, quote: str | None = None) -> int:
    return await add(
        engine, Reply, turn_id=None, stream_id=stream_id, bubbles=["b"], quote=quote, created_at=at
    )


async def test_settled_outbox_rows_go_with_their_replies_open_ones_stay(
    engine: AsyncEngine, timeline: TimelineWriter, clock: Clock
) -> None:
    written = await timeline.write(message("x", time=OLD))
    assert isinstance(written, MessageWritten)
    stream = written.stream_id
    sent_reply, open_reply = await reply(engine, stream, OLD), await reply(engine, stream, OLD)
    await outbox_row(engine, stream, "sent", OLD, sent_reply)
    await outbox_row(engine, stream, "sent", OLD, sent_reply)
    stuck = await outbox_row(engine, stream, "pending", OLD, open_reply)
    young = await outbox_row(engine, stream, "sent", NOW)
    done = await RetentionStore(engine).prune_outbox(CUTOFF, Budget(rows=10, pause_s=0))
    assert done.deleted == 2
    assert await ids(engine, OutboxItem.id) == [stuck, young]
    assert await ids(engine, Reply.id) == [open_reply]


async def test_a_reply_still_to_be_sent_holds_its_turn_and_its_quote(
    engine: AsyncEngine, timeline: TimelineWriter, clock: Clock
) -> None:
    clock.now = OLD
    quoted = await timeline.write(message("q", time=OLD, platform_message_id="quoted-1"))
    assert isinstance(quoted, MessageWritten)
    stream = quoted.stream_id
    pending = await reply(engine, stream, OLD, quote="quoted-1")
    await outbox_row(engine, stream, "pending", OLD, pending, turn_id=5)
    await outbox_row(engine, stream, "sent", OLD, await reply(engine, stream, OLD), turn_id=6)
    holds = await outbox_holds(engine)
    assert holds.message_ids == {quoted.message_id}
    assert holds.turn_ids == {5}


async def test_memory_holds_its_evidence_and_consents(
    engine: AsyncEngine, timeline: TimelineWriter, clock: Clock
) -> None:
    said = [await say(timeline, clock, OLD + timedelta(minutes=n)) for n in range(4)]
    written = await timeline.write(message("x", time=OLD))
    assert isinstance(written, MessageWritten)
    for sources, status in (([said[0], said[1]], "active"), ([said[2]], "forgotten")):
        await add(
            engine,
            MemoryEntry,
            kind="fact",
            stream_id=written.stream_id,
            person_id=written.person_id,
            text="t",
            source="extraction",
            source_message_ids=sources,
            confidence=0.9,
            status=status,
            created_at=OLD,
            updated_at=OLD,
            last_seen_at=OLD,
        )
    async with engine.begin() as conn:
        await conn.execute(
            insert(MemoryConsent).values(
                person_id=written.person_id, granted_at=OLD, message_id=said[3]
            )
        )
    holds = await memory_holds(engine)
    assert holds.message_ids == set(said)
    done = await RetentionStore(engine).prune_messages(CUTOFF, holds, Budget(pause_s=0))
    assert done.deleted == 1
    assert await ids(engine, Message.id) == said


async def test_a_scan_holds_what_lies_after_its_cursor(engine: AsyncEngine) -> None:
    assert (await scan_holds(engine, "sticker_habit")).since is None
    await add(
        engine, ScanCursor, name="sticker_habit", after_time=OLD, after_message_id=3, updated_at=OLD
    )
    assert (await scan_holds(engine, "sticker_habit")).since == OLD


def test_holds_join_and_the_earliest_since_wins() -> None:
    joined = Holds(frozenset({1}), frozenset(), NOW) | Holds(frozenset({2}), frozenset({9}), OLD)
    assert joined == Holds(frozenset({1, 2}), frozenset({9}), OLD)
    assert joined.keeps(1, None) and joined.keeps(5, 9) and not joined.keeps(5, None)


def test_a_slow_batch_halves_the_next_and_a_quick_one_doubles_it_up_to_the_cap() -> None:
    budget = Budget(rows=2000, batch_s=0.1, min_rows=100)
    assert budget.next_rows(2000, 0.25) == 1000
    assert budget.next_rows(150, 0.25) == 100  # never below the floor
    assert budget.next_rows(1000, 0.07) == 1000  # near the target: kept
    assert budget.next_rows(1000, 0.01) == 2000
    assert budget.next_rows(2000, 0.01) == 2000  # never above the cap
    assert Budget(rows=2).next_rows(2, 5.0) == 2  # a cap below the floor is the floor
