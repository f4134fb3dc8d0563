"""A digest for the admins, on the real store: privately to each admin, and to the group
(once, with the setting moved back) when none of them got it (docs/summaries.md)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.local_time import SHANGHAI
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery, OutboxDispatcher
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.summaries.digest import (
    CHECK_KIND,
    FELL_BACK,
    MAX_LOOKS,
    AdminDelivery,
    delivery_verdict,
)
from pallas.product.summaries.making import SummaryAsk
from pallas.product.summaries.window import Window
from pallas.store.jobs import JobStore
from pallas.store.ledger import LedgerWriter
from pallas.store.models import OutboxItem, Stream
from pallas.store.outbox import OutboxStore
from pallas.store.timeline import TimelineWriter
from tests.product.conversation.delivery.test_outbox import POLICY, Outlet
from tests.support.inbound import group, message

AT = datetime(2026, 12, 6, 22, 0, tzinfo=SHANGHAI)
WORDS = "今天的聊天日报（5 条）：阿青约了爬山。"


class Clock:
    def __init__(self) -> None:
        self.now = AT

    def __call__(self) -> datetime:
        return self.now


class Changes:
    def __init__(self) -> None:
        self.made: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, scope_id: str, changes: Mapping[str, Any]) -> None:
        self.made.append((scope_id, dict(changes)))


def delivery(engine: AsyncEngine, clock: Clock, changes: Changes) -> tuple[AdminDelivery, Jobs]:
    ledger = LedgerWriter(engine)
    dispatcher = OutboxDispatcher(OutboxStore(engine), Outlet(), ledger, POLICY, clock)
    sender = OutboxDelivery(OutboxStore(engine), dispatcher, clock)
    jobs = Jobs(JobStore(engine), clock)
    admins = AdminDelivery(engine, sender, OutboxStore(engine), jobs, lambda: 1, clock, changes)
    jobs.handle(CHECK_KIND, admins.check)
    return admins, jobs


async def sent_to(engine: AsyncEngine) -> list[tuple[str, str, str]]:
    query = (select(Stream.kind, Stream.external_id, OutboxItem.payload)
             .join(Stream, Stream.id == OutboxItem.stream_id).order_by(OutboxItem.id))  # fmt: skip
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [(r.kind, r.external_id, r.payload["segments"][0]["text"]) for r in rows]


async def run_check(engine: AsyncEngine, admins: AdminDelivery, clock: Clock) -> None:
    clock.now += timedelta(seconds=61)
    [job] = await JobStore(engine).claim("test", clock.now, lease=timedelta(minutes=1), limit=5)
    assert job.kind == CHECK_KIND
    await admins.check(job)
    await JobStore(engine).finish(job.id, "test", clock.now)


async def test_no_admin_got_it_so_the_group_does_and_is_told_once(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    stored = await writer.write(message("早", stream=group("900"), user_id="7", role="admin"))
    await writer.write(message("早", stream=group("900"), user_id="8", role="owner"))
    await writer.write(message("早", stream=group("900"), user_id="9", role="member"))
    clock, changes = Clock(), Changes()
    admins, _ = delivery(engine, clock, changes)
    ask = SummaryAsk("digest:1:2026-12-06", stored.stream_id, Window(), 99, AT, "10000",
                     digest=True, to_admins=True)  # fmt: skip
    await admins(ask, WORDS)
    assert await sent_to(engine) == [("private", "7", WORDS), ("private", "8", WORDS)]
    await admins(ask, WORDS)  # a run again after a crash queues nothing twice
    assert len(await sent_to(engine)) == 2

    await run_check(engine, admins, clock)  # still on their way: looked at again later
    assert len(await sent_to(engine)) == 2
    async with engine.begin() as conn:  # QQ refused both (not the bot's friends)
        await conn.execute(update(OutboxItem).values(status="failed"))
    await run_check(engine, admins, clock)
    assert (await sent_to(engine))[2] == ("group", "900", f"{WORDS}\n{FELL_BACK}")
    assert changes.made == [(str(stored.stream_id), {"digest_to": "group"})]


async def test_an_admin_got_it_so_the_group_hears_nothing(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    stored = await writer.write(message("早", stream=group("901"), user_id="7", role="admin"))
    clock, changes = Clock(), Changes()
    admins, _ = delivery(engine, clock, changes)
    ask = SummaryAsk("digest:2:2026-12-06", stored.stream_id, Window(), 99, AT, "10000",
                     digest=True, to_admins=True)  # fmt: skip
    await admins(ask, WORDS)
    async with engine.begin() as conn:
        await conn.execute(update(OutboxItem).values(status="sent"))
    await run_check(engine, admins, clock)
    assert [to[:2] for to in await sent_to(engine)] == [("private", "7")]
    assert changes.made == []


def test_an_admin_got_it_when_one_was_sent_or_may_have_been() -> None:
    assert delivery_verdict({"sent", "failed"}, 1) == "got"
    assert delivery_verdict({"unknown"}, 1) == "got"  # after a crash: never sent twice
    assert delivery_verdict({"pending", "failed"}, 1) == "wait"
    assert delivery_verdict({"sending"}, MAX_LOOKS) == "refused"
    assert delivery_verdict({"failed", "expired"}, 1) == "refused"


async def test_a_group_with_no_known_admin_gets_it_at_once(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    stored = await writer.write(message("早", stream=group("902"), user_id="9", role="member"))
    clock, changes = Clock(), Changes()
    admins, _ = delivery(engine, clock, changes)
    ask = SummaryAsk("digest:3:2026-12-06", stored.stream_id, Window(), 99, AT, "10000",
                     digest=True, to_admins=True)  # fmt: skip
    await admins(ask, WORDS)
    assert await sent_to(engine) == [("group", "902", WORDS)]
    assert changes.made == []  # no private message was tried: the setting stays
