"""A process's lease and the takeover of a dead one's work, on a real store (docs/scaling.md)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.jobs.registry import holder_prefix
from pallas.product.conversation.processes.lease import NameInUse, ProcessLease
from pallas.product.conversation.processes.takeover import (
    SharedChats,
    Takeover,
    to_take_over,
)
from pallas.product.conversation.turns.recovery import RecoveryReport
from pallas.store.jobs import JobStore
from pallas.store.processes import ChatTurns, Owners, ProcessStore
from pallas.store.timeline import TimelineWriter
from tests.support.inbound import group, message

LEASE = timedelta(seconds=3)


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)
        self.mono = 1000.0

    def wall(self) -> datetime:
        return self.now

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.mono += seconds


def _lease(engine: AsyncEngine, name: str, clock: Clock, *, alone: bool = False) -> ProcessLease:
    return ProcessLease(ProcessStore(engine), name, LEASE, clock.wall, alone=alone,
                        monotonic=clock.monotonic)  # fmt: skip


async def test_a_lease_is_good_only_while_recently_renewed(engine: AsyncEngine) -> None:
    clock = Clock()
    lease = _lease(engine, "p1", clock)
    assert not lease.valid()  # not joined yet: acts on nothing
    await lease.join(lambda: ("10001",))
    assert lease.valid()
    clock.advance(2.5)  # past four fifths of the lease with no renewal
    assert not lease.valid()
    assert await lease.renew()
    assert lease.valid()
    assert lease.connected_elsewhere("10001")


async def test_alone_on_its_store_every_claim_is_its_own(engine: AsyncEngine) -> None:
    lease = _lease(engine, "p1", Clock(), alone=True)
    assert lease.valid() and lease.settles("another") and lease.owners() == Owners()


async def test_a_live_namesake_is_refused_and_a_dead_one_is_taken_over(
    engine: AsyncEngine,
) -> None:
    live = ProcessLease(ProcessStore(engine), "same", LEASE, lambda: datetime.now(UTC),
                        alone=False)  # fmt: skip
    await live.join(tuple)
    live.start()
    try:
        with pytest.raises(NameInUse, match="PALLAS_PROCESS_NAME"):
            await ProcessLease(ProcessStore(engine), "same", LEASE,
                               lambda: datetime.now(UTC), alone=False).join(tuple)  # fmt: skip
    finally:
        live.halt()  # killed: its row stays fresh for a moment, then nobody renews it
    again = ProcessLease(ProcessStore(engine), "same", LEASE, lambda: datetime.now(UTC),
                         alone=False)  # fmt: skip
    await again.join(tuple)
    assert again.valid()
    assert not await live.renew()  # the old run's word no longer counts


async def test_a_process_frozen_past_its_lease_learns_it_lost_it(engine: AsyncEngine) -> None:
    clock = Clock()
    frozen, heir = _lease(engine, "p1", clock), _lease(engine, "p2", clock)
    await frozen.join(tuple)
    await heir.join(tuple)
    lost = asyncio.Event()

    async def on_lost() -> None:
        lost.set()

    frozen.on_lost = on_lost
    clock.advance(4)
    assert await heir.renew()
    assert to_take_over(heir.view, "p2") == [("p1", None)]
    assert await heir.store.claim_recovery("p1", "p2", clock.now)
    assert not frozen.valid()
    assert not await frozen.renew()
    await frozen._lost()
    assert lost.is_set()


async def test_a_takeover_finishes_the_dead_ones_work_and_passes_its_chats_on(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    clock = Clock()
    dead, heir = _lease(engine, "p1", clock), _lease(engine, "p2", clock)
    await dead.join(tuple)
    await heir.join(tuple)
    writer.stored_by = "p1"
    written = await writer.write(message("在吗", stream=group("takeover"), user_id="5"))
    stream_id = written.stream_id  # type: ignore[union-attr]
    assert await ChatTurns(engine, "p1").take(stream_id, clock.now)
    jobs = JobStore(engine)
    await jobs.enqueue("slow.work", {}, clock.now)
    claimed = await jobs.claim(f"{holder_prefix('p1')}abcd1234", clock.now,
                               lease=timedelta(minutes=5), limit=1)  # fmt: skip
    assert claimed
    recovered: list[Owners] = []

    async def recover(owners: Owners) -> RecoveryReport:
        recovered.append(owners)
        return RecoveryReport()

    async def release_jobs(name: str) -> int:
        return await jobs.release_running(clock.now, holder_prefix(name))

    takeover = Takeover(heir, recover, release_jobs, clock.wall)
    chats = SharedChats(ChatTurns(engine, "p2"), heir, clock.wall)
    await takeover.after_renewal(heir.view)
    assert recovered == []  # still alive: nothing to take over
    assert not await chats.take(stream_id)
    clock.advance(4)
    assert await heir.renew()
    await takeover.after_renewal(heir.view)
    await takeover.wait()
    assert recovered == [Owners(frozenset({"p1"}))]
    assert heir.settles("p1")  # its rows left `sending` are the heir's to settle now
    assert await chats.take(stream_id)
    again = await jobs.claim("p2|00000000", clock.now, lease=timedelta(minutes=5), limit=1)
    assert [job.id for job in again] == [job.id for job in claimed]  # not after 5 minutes
    await takeover.after_renewal(heir.view)
    await takeover.wait()
    assert len(recovered) == 1  # once
