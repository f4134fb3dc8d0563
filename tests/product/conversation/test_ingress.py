"""Ingress order: persist first, stop duplicates, hand only new inbound messages onward."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.ingress import (
    CONTINUE,
    Ingress,
    IngressOutcome,
    StageResult,
    StoredMessage,
)
from pallas.store.models import Message
from pallas.store.timeline import TimelineWriter
from tests.support.inbound import member_change, message


class Recorder:
    def __init__(self, engine: AsyncEngine, fail: bool = False) -> None:
        self.engine = engine
        self.fail = fail
        self.seen: list[StoredMessage] = []
        self.committed_when_seen: list[bool] = []

    async def on_message(self, stored: StoredMessage) -> StageResult:
        async with self.engine.connect() as conn:
            found = await conn.execute(
                select(func.count()).select_from(Message).where(Message.id == stored.message_id)
            )
            self.committed_when_seen.append(found.scalar() == 1)
        self.seen.append(stored)
        if self.fail:
            raise RuntimeError("next stage exploded")
        return CONTINUE


async def test_next_stage_sees_each_new_message_once_after_commit(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    recorder = Recorder(engine)
    ingress = Ingress(writer, recorder)
    item = message("一条")
    first = await ingress.accept(item)
    again = await ingress.accept(item)
    assert (first.outcome, again.outcome) == (IngressOutcome.ACCEPTED, IngressOutcome.DUPLICATE)
    assert first.should_continue and not again.should_continue
    assert [s.message for s in recorder.seen] == [item]
    assert recorder.committed_when_seen == [True]


async def test_own_messages_and_notices_are_recorded_not_handed_on(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    recorder = Recorder(engine)
    ingress = Ingress(writer, recorder)
    own = await ingress.accept(message("我说的", user_id="10000", from_bot=True))
    notice = await ingress.accept(member_change("5", joined=True))
    assert own.outcome is IngressOutcome.RECORDED and own.stored is not None
    assert notice.outcome is IngressOutcome.RECORDED
    assert recorder.seen == []


async def test_a_failing_next_stage_loses_nothing(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    ingress = Ingress(writer, Recorder(engine, fail=True))
    result = await ingress.accept(message("还在"))
    assert result.outcome is IngressOutcome.ACCEPTED
    async with engine.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(Message))).scalar() == 1


async def test_a_store_failure_stops_the_event(engine: AsyncEngine) -> None:
    writer = TimelineWriter(engine)  # never started: every write fails
    recorder = Recorder(engine)
    result = await Ingress(writer, recorder).accept(message("丢不了也进不来"))
    assert result.outcome is IngressOutcome.FAILED and not result.should_continue
    assert recorder.seen == []


async def test_plugging_a_stage_later(engine: AsyncEngine, writer: TimelineWriter) -> None:
    ingress = Ingress(writer)
    await ingress.accept(message("before"))
    recorder = Recorder(engine)
    ingress.plug(recorder)
    await ingress.accept(message("after"))
    assert [s.message.text for s in recorder.seen] == ["after"]
