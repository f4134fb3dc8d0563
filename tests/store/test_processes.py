"""The process table, the chats' turn leases and the id blocks, on SQLite and PostgreSQL
(docs/scaling.md)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.platform.onebot.send import own_message
from pallas.store.engine import create_engine
from pallas.store.models import Message, OutboxItem
from pallas.store.outbox import NewItem, OutboxStore
from pallas.store.processes import ChatTurns, IdBlocks, Owners, ProcessStore
from pallas.store.timeline import TimelineWriter
from tests.support.inbound import group, message

T0 = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


async def _stream(writer: TimelineWriter, external: str) -> int:
    written = await writer.write(own_message(group(external), (), f"seed-{external}", T0))
    return written.stream_id  # type: ignore[union-attr]


async def test_a_renewal_keeps_the_lease_until_another_process_recovers_it(
    engine: AsyncEngine,
) -> None:
    store = ProcessStore(engine)
    await store.register("p1", "run-a", T0, LEASE)
    await store.register("p2", "run-b", T0, LEASE)
    assert await store.renew("p1", "run-a", T0 + timedelta(seconds=10), LEASE, ("10001",))
    view = await store.read(T0 + timedelta(seconds=20))
    assert view.alive("p1") and view.alive("p2")
    assert view.connected_accounts() == {"10001"}
    # Not expired yet: nobody may claim its recovery.
    assert not await store.claim_recovery("p1", "p2", T0 + timedelta(seconds=39))
    later = T0 + timedelta(seconds=41)
    assert not await store.claim_recovery("p1", "p1", later)  # never one's own
    claims = await asyncio.gather(store.claim_recovery("p1", "p2", later),
                                  store.claim_recovery("p1", "p3", later))  # fmt: skip
    assert sorted(claims) == [False, True]
    # Frozen past its lease and resumed: its renewal fails, so it knows to stop.
    assert not await store.renew("p1", "run-a", later, LEASE, ("10001",))
    assert not (await store.read(later)).alive("p1")


async def test_a_new_run_of_a_name_takes_it_and_the_old_run_can_no_longer_renew(
    engine: AsyncEngine,
) -> None:
    store = ProcessStore(engine)
    await store.register("p1", "old", T0, LEASE)
    await store.register("p1", "new", T0 + timedelta(seconds=50), LEASE)
    assert not await store.renew("p1", "old", T0 + timedelta(seconds=51), LEASE, ())
    assert await store.renew("p1", "new", T0 + timedelta(seconds=51), LEASE, ())
    await store.leave("p1", "new", T0 + timedelta(seconds=52))
    found = await store.find("p1")
    assert found is not None and not found.alive(T0 + timedelta(seconds=52))


async def test_a_chats_turn_passes_on_only_once_its_holder_was_recovered(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = ProcessStore(engine)
    stream_id = await _stream(writer, "lease-1")
    await store.register("p1", "a", T0, LEASE)
    await store.register("p2", "b", T0, LEASE)
    mine, theirs = ChatTurns(engine, "p1"), ChatTurns(engine, "p2")
    assert await mine.take(stream_id, T0)
    assert await mine.take(stream_id, T0)  # its own again
    assert not await theirs.take(stream_id, T0)
    # Expired but not yet recovered: the chat still waits (its turn may be cut off mid-way).
    later = T0 + timedelta(minutes=5)
    assert not await theirs.take(stream_id, later)
    assert await store.claim_recovery("p1", "p2", later)
    assert not await theirs.take(stream_id, later)
    await store.recovered("p1", "p2", later)
    assert await theirs.take(stream_id, later)
    await theirs.release(stream_id)
    assert await mine.take(stream_id, later)  # released: free for anyone


async def test_two_processes_taking_a_new_chat_at_once_one_wins(
    engine: AsyncEngine, writer: TimelineWriter, migrated_url: str
) -> None:
    other = create_engine(migrated_url)
    try:
        store = ProcessStore(engine)
        await store.register("p1", "a", T0, LEASE)
        await store.register("p2", "b", T0, LEASE)
        stream_id = await _stream(writer, "lease-2")
        taken = await asyncio.gather(ChatTurns(engine, "p1").take(stream_id, T0),
                                     ChatTurns(other, "p2").take(stream_id, T0))  # fmt: skip
        assert sorted(taken) == [False, True]
    finally:
        await other.dispose()


async def test_blocks_of_ids_never_overlap_and_start_above_what_exists(
    engine: AsyncEngine, migrated_url: str
) -> None:
    other = create_engine(migrated_url)
    try:
        first = await IdBlocks(engine).take("turn", 100, at_least=41)
        assert first == range(42, 142)
        blocks = await asyncio.gather(*(IdBlocks(e).take("turn", 100) for e in (engine, other)))
        numbers = [n for block in (first, *blocks) for n in block]
        assert len(numbers) == len(set(numbers)) == 300
    finally:
        await other.dispose()


async def test_a_dead_processs_recent_messages_are_adopted_by_its_heir(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    writer.stored_by = "p1"
    old = await writer.write(message("旧的", stream=group("adopt"), user_id="5"))
    async with engine.begin() as conn:  # stored a day and more ago
        await conn.execute(
            Message.__table__.update()
            .where(Message.id == old.message_id)  # type: ignore[union-attr]
            .values(stored_at=datetime.now(UTC) - timedelta(days=2))
        )
    fresh = await writer.write(message("新的", stream=group("adopt"), user_id="5"))
    writer.stored_by = "p2"
    theirs = await writer.write(message("别人的", stream=group("adopt"), user_id="6"))
    store = ProcessStore(engine)
    adopted = await store.adopt_messages("p1", "p3", datetime.now(UTC) - timedelta(days=1))
    assert adopted == 1
    async with engine.connect() as conn:
        owners = dict((await conn.execute(select(Message.id, Message.stored_by))).all())
    assert owners[fresh.message_id] == "p3"  # type: ignore[union-attr]
    assert owners[old.message_id] == "p1"  # type: ignore[union-attr]
    assert owners[theirs.message_id] == "p2"  # type: ignore[union-attr]


def test_owners_name_whose_leftovers_a_recovery_takes() -> None:
    assert Owners().holds("anyone") and Owners().holds(None) and Owners().clause() is None
    mine = Owners(frozenset({"p1"}), unnamed=True)
    assert mine.holds("p1") and mine.holds(None) and not mine.holds("p2")
    dead = Owners(frozenset({"p2"}))
    assert dead.holds("p2") and not dead.holds(None) and not dead.holds("p1")


async def test_the_first_process_takes_the_leftovers_from_before_names(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    unnamed = await writer.write(message("升级前的", stream=group("unnamed"), user_id="5"))
    outbox = OutboxStore(engine)  # a row a process without a name was sending
    stream_id = unnamed.stream_id  # type: ignore[union-attr]
    queued = await outbox.enqueue(1, stream_id, [NewItem("message", {"text": "好"})], T0)
    await outbox.mark_sending(queued.ids, T0)
    store = ProcessStore(engine)
    now = datetime.now(UTC)
    assert await store.claim_unnamed("p1", now - timedelta(days=1), now) == 1
    assert await store.claim_unnamed("p2", now - timedelta(days=1), now) == 0  # once
    async with engine.connect() as conn:
        stored_by = (await conn.execute(select(Message.stored_by))).scalars().all()
        holders = (await conn.execute(select(OutboxItem.holder))).scalars().all()
    assert set(stored_by) == {"p1"} and holders == ["p1"]


async def test_a_name_being_taken_over_waits_unless_its_taker_died(engine: AsyncEngine) -> None:
    store = ProcessStore(engine)
    await store.register("a", "run-1", T0, LEASE)
    await store.register("b", "run-1", T0 + timedelta(seconds=40), LEASE)
    assert await store.claim_recovery("a", "b", T0 + timedelta(seconds=40))
    # b is taking a's last run over: a's next run waits for it.
    assert not await store.register("a", "run-2", T0 + timedelta(seconds=41), LEASE)
    # b died in the middle (its lease expired too): a's next run takes its own name back.
    assert await store.register("a", "run-2", T0 + timedelta(seconds=80), LEASE)


async def test_a_takeover_whose_taker_died_passes_on_once_the_taker_was_recovered(
    engine: AsyncEngine,
) -> None:
    store = ProcessStore(engine)
    for name in ("a", "b", "c"):
        await store.register(name, "run", T0, LEASE)
    later = T0 + timedelta(seconds=40)
    assert await store.renew("c", "run", later, LEASE, ())
    assert await store.claim_recovery("a", "b", later)  # b takes a over, then stops renewing
    at = T0 + timedelta(seconds=60)
    assert not await store.claim_recovery("a", "c", at, from_="b")  # b may only be paused
    assert await store.claim_recovery("b", "c", at)
    await store.recovered("b", "c", at)
    assert await store.claim_recovery("a", "c", at, from_="b")
