"""The turn_buffers: one turn per stream at a time, streams in parallel, nothing lost or doubled."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.gate.facts import MessageFacts
from pallas.product.conversation.gate.gate import Disposition, Outcome, Reason
from pallas.product.conversation.ingress import StoredMessage
from pallas.product.conversation.turns import buffers as scheduler_module
from pallas.product.conversation.turns.buffers import Batch, TurnBuffers, TurnSource
from pallas.product.conversation.turns.turn import Admitted, TurnDecision
from pallas.store.ledger import LedgerWriter
from pallas.store.models import Event, Stream
from pallas.store.timeline import TimelineWriter
from tests.support.inbound import T0, group, message
from tests.support.waiting import until

PASS = Disposition(Outcome.DELIBERATE, Reason.ATTENTION)
_ids = iter(range(1, 1_000_000))


def admitted(stream_id: int, person_id: int = 1) -> Admitted:
    mid = next(_ids)
    msg = message(f"m{mid}", stream=group(str(stream_id)), platform_message_id=str(mid))
    return Admitted(StoredMessage(mid, stream_id, person_id, msg), MessageFacts(), PASS)


@pytest.fixture
async def ledger(engine: AsyncEngine) -> AsyncIterator[LedgerWriter]:
    async with engine.begin() as conn:  # ledger rows point at real streams (ids 1..30), people
        await conn.execute(
            insert(Stream),
            [
                {
                    "platform": "qq",
                    "self_id": "1",
                    "kind": "group",
                    "external_id": str(i),
                    "name": "",
                    "created_at": T0,
                }
                for i in range(1, 31)
            ],
        )
    writer = LedgerWriter(engine)
    writer.start()
    yield writer
    await writer.close()


async def _events(engine: AsyncEngine, kind: str) -> list[Event]:
    async with engine.connect() as conn:
        return list((await conn.execute(select(Event).where(Event.kind == kind))).all())


async def test_thousand_messages_twenty_streams_slow_handler(ledger: LedgerWriter) -> None:
    active: dict[int, int] = defaultdict(int)
    most_in_one_stream = 0
    most_streams_at_once = 0
    consumed: dict[int, list[int]] = defaultdict(list)
    rng = random.Random(7)

    async def slow_turn(batch: Batch) -> TurnDecision:
        nonlocal most_in_one_stream, most_streams_at_once
        active[batch.stream_id] += 1
        most_in_one_stream = max(most_in_one_stream, active[batch.stream_id])
        most_streams_at_once = max(most_streams_at_once, sum(1 for v in active.values() if v))
        await asyncio.sleep(rng.uniform(0.001, 0.01))
        consumed[batch.stream_id].extend(item.message_id for item in batch.items)
        active[batch.stream_id] -= 1
        return TurnDecision.DONE

    turn_buffers = TurnBuffers(slow_turn, ledger, buffer_cap=2_000)
    turn_buffers.start()
    sent: dict[int, list[int]] = defaultdict(list)
    for i in range(1_000):
        stream_id = i % 20 + 1
        item = admitted(stream_id, person_id=rng.randint(1, 3))
        sent[stream_id].append(item.message_id)
        turn_buffers.submit(item, private=False)
        if i % 50 == 0:
            await asyncio.sleep(0.002)
    await until(lambda: sum(len(v) for v in consumed.values()) == 1_000)
    await turn_buffers.stop()
    assert most_in_one_stream == 1
    assert most_streams_at_once > 1
    assert consumed == sent  # every message exactly once, in order, per stream


async def test_a_batch_is_the_head_run_of_one_sender(ledger: LedgerWriter) -> None:
    batches: list[list[int]] = []

    async def record(batch: Batch) -> TurnDecision:
        batches.append([item.sender_person_id for item in batch.items])
        return TurnDecision.DONE

    turn_buffers = TurnBuffers(record, ledger)
    for person in (1, 1, 2, 1):
        turn_buffers.submit(admitted(5, person), private=False)
    turn_buffers.start()
    await until(lambda: sum(map(len, batches)) == 4)
    await turn_buffers.stop()
    assert batches == [[1, 1], [2], [1]]


async def test_overflow_is_recorded_and_other_streams_still_run(
    engine: AsyncEngine, ledger: LedgerWriter
) -> None:
    timeline = TimelineWriter(engine)  # overflow records point at real timeline rows
    timeline.start()
    burst = []
    for i in range(1_001):
        msg = message(f"b{i}", stream=group("burst"), user_id=str(i % 7))
        written = await timeline.write(msg)
        burst.append(
            Admitted(
                StoredMessage(written.message_id, written.stream_id, written.person_id, msg),
                MessageFacts(),
                PASS,
            )
        )
    await timeline.close()
    stuck_stream = burst[0].stored.stream_id
    release = asyncio.Event()
    ran: list[int] = []

    async def turn(batch: Batch) -> TurnDecision:
        if batch.stream_id == stuck_stream:
            await release.wait()  # this stream is stuck in a long turn
        ran.append(batch.stream_id)
        return TurnDecision.DONE

    turn_buffers = TurnBuffers(turn, ledger, buffer_cap=50)
    turn_buffers.start()
    turn_buffers.submit(burst[0], private=False)
    await until(lambda: stuck_stream in turn_buffers.running)
    for item in burst[1:]:
        turn_buffers.submit(item, private=False)
    turn_buffers.submit(admitted(2), private=False)
    await until(lambda: 2 in ran)
    assert turn_buffers.buffered(stuck_stream) == 50
    release.set()
    await turn_buffers.stop()
    await ledger.close()
    overflow = [e for e in await _events(engine, "gate_dropped") if e.reason == "buffer_overflow"]
    assert sorted(e.message_id for e in overflow) == [a.message_id for a in burst[1:951]]


async def test_claims_record_only_cross_source_competition(
    engine: AsyncEngine, ledger: LedgerWriter
) -> None:
    async def never(batch: Batch) -> TurnDecision:
        return TurnDecision.DONE

    turn_buffers = TurnBuffers(never, ledger)
    assert turn_buffers.try_claim(3, TurnSource.PROACTIVE)
    assert not turn_buffers.try_claim(3, TurnSource.PROACTIVE)
    assert not turn_buffers.try_claim(3, TurnSource.REPLY)
    turn_buffers.release(3)
    assert turn_buffers.try_claim(3, TurnSource.REPLY)
    await ledger.close()
    events = await _events(engine, "turn_competition")
    assert [e.reason for e in events] == ["reply_blocked_by_proactive"]


async def test_a_failure_while_taking_a_batch_keeps_it_at_the_head(
    ledger: LedgerWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[int] = []
    real_head_run = scheduler_module.head_run
    failures = iter([True])

    def flaky(items):  # type: ignore[no-untyped-def]
        if next(failures, False):
            raise RuntimeError("boom")
        return real_head_run(items)

    monkeypatch.setattr(scheduler_module, "head_run", flaky)

    async def turn(batch: Batch) -> TurnDecision:
        taken.extend(item.message_id for item in batch.items)
        return TurnDecision.DONE

    turn_buffers = TurnBuffers(turn, ledger)
    item = admitted(4)
    turn_buffers.submit(item, private=False)
    turn_buffers.tick()  # fails: nothing taken, stream released
    assert turn_buffers.buffered(4) == 1 and not turn_buffers.running
    turn_buffers.start()
    await until(lambda: taken == [item.message_id])
    await turn_buffers.stop()


async def test_group_wait_holds_until_more_arrives(ledger: LedgerWriter) -> None:
    seen: list[tuple[list[int], bool]] = []

    async def turn(batch: Batch) -> TurnDecision:
        seen.append(([i.message_id for i in batch.items], batch.may_wait))
        return TurnDecision.WAIT if batch.may_wait else TurnDecision.DONE

    clock = [0.0]
    turn_buffers = TurnBuffers(turn, ledger, monotonic=lambda: clock[0], private_wait_s=10)
    turn_buffers.start()
    first = admitted(6)
    turn_buffers.submit(first, private=False)
    await until(lambda: len(seen) == 1 and not turn_buffers.running)
    clock[0] += 3_600  # an hour on the turn buffers' clock: a private wait would have reopened
    turn_buffers.tick()
    assert len(seen) == 1 and turn_buffers.buffered(6) == 1  # a group waits for more, however long
    second = admitted(6)
    turn_buffers.submit(second, private=False)
    await until(lambda: len(seen) == 2)
    await turn_buffers.stop()
    assert seen == [([first.message_id], True), ([first.message_id, second.message_id], False)]


async def test_private_wait_reopens_after_the_timeout_without_wait(ledger: LedgerWriter) -> None:
    seen: list[bool] = []

    async def turn(batch: Batch) -> TurnDecision:
        seen.append(batch.may_wait)
        return TurnDecision.WAIT if batch.may_wait else TurnDecision.DONE

    turn_buffers = TurnBuffers(turn, ledger, private_wait_s=0.3)
    turn_buffers.start()
    turn_buffers.submit(admitted(7), private=True)
    await until(lambda: len(seen) == 2)
    await turn_buffers.stop()
    assert seen == [True, False]
