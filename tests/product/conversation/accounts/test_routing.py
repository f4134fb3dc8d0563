"""Which account a queued row goes through, on a real store and the real dispatcher: a row
waits for its disconnected account, or moves to another in the group when the owner allows;
a quote names the message by the sending account's own id (docs/accounts.md)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import Origin
from pallas.core.inbound import Segment, SegmentKind, StreamKey
from pallas.product.conversation.accounts.book import AccountBook, AccountRules
from pallas.product.conversation.accounts.routing import AccountRouting
from pallas.product.conversation.delivery.contract import OutgoingMessage, OutgoingReply
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery, OutboxDispatcher
from pallas.store.ledger import LedgerWriter
from pallas.store.models import Event, OutboxItem
from pallas.store.outbox import OutboxStore
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.product.conversation.delivery.test_outbox import POLICY, Outlet
from tests.support.inbound import group, message
from tests.support.waiting import until

A, B = "52001", "52002"
_ids = itertools.count(8_000_000)


@dataclass
class Accounts(Outlet):
    """NapCat behind each account: who is connected, and what each one sent."""

    online: set[str] = field(default_factory=lambda: {A, B})
    by: list[tuple[str, str, str | None]] = field(default_factory=list)  # account, text, quote

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None:
        self.by.append((stream.self_id, segments[0].text, quote))
        return str(next(_ids))

    async def is_connected(self, self_id: str) -> bool:
        return self_id in self.online


@dataclass
class Rig:
    engine: AsyncEngine
    ledger: LedgerWriter
    timeline: TimelineWriter
    outlet: Accounts
    book: AccountBook
    dispatcher: OutboxDispatcher
    sender: OutboxDelivery


async def _rig(engine: AsyncEngine, handover: bool) -> Rig:
    ledger, timeline = LedgerWriter(engine), TimelineWriter(engine)
    ledger.start()
    timeline.start()
    outlet = Accounts()
    book = AccountBook(engine, outlet.is_connected, AccountRules({}, handover))
    store, clock = OutboxStore(engine), lambda: datetime.now(UTC)
    route = AccountRouting(book)
    dispatcher = OutboxDispatcher(store, outlet, ledger, POLICY, clock, route=route)
    sender = OutboxDelivery(store, dispatcher, clock, account_for=book.answering_account)
    dispatcher.start()
    return Rig(engine, ledger, timeline, outlet, book, dispatcher, sender)


@pytest.fixture(params=[False, True], ids=["waits", "handover"])
async def rig(engine: AsyncEngine, request: pytest.FixtureRequest) -> AsyncIterator[Rig]:
    rig = await _rig(engine, handover=request.param)
    yield rig
    await rig.dispatcher.stop()
    await rig.timeline.close()
    await rig.ledger.close()


async def seen_by_both(rig: Rig, text: str, seq: str) -> MessageWritten:
    """A member's message, delivered by both accounts with their own ids."""
    first = await rig.timeline.write(
        replace(message(text, stream=group("700", A), platform_message_id=f"a{seq}"), qq_seq=seq)
    )
    await rig.timeline.write(
        replace(message(text, stream=group("700", B), platform_message_id=f"b{seq}"), qq_seq=seq)
    )
    for account in (A, B):
        await rig.book.saw(first.stream_id, account)  # as the ingress does
    assert isinstance(first, MessageWritten)
    return first


async def test_a_reply_for_a_disconnected_account_waits_or_is_handed_over(rig: Rig) -> None:
    handover = rig.book.rules.handover
    trigger = await seen_by_both(rig, "二号在吗", "1")
    rig.outlet.online = {A}
    reply = OutgoingReply(1, trigger.stream_id, group("700", B), ("在的",), quote=f"a{1}")
    await rig.sender.deliver(reply)
    if handover:
        await until(lambda: rig.outlet.by)
        assert rig.outlet.by == [(A, "在的", "a1")]  # A's own id for the quoted message
        async with rig.engine.connect() as conn:
            account = await conn.scalar(select(OutboxItem.account))
            kinds = list(await conn.scalars(select(Event.reason).where(
                Event.kind == "delivery_handed_over")))  # fmt: skip
        assert (account, kinds) == (A, ["handover"])
        return
    await asyncio.sleep(0.5)
    assert rig.outlet.by == []  # waits for B
    rig.outlet.online = {A, B}
    rig.dispatcher.wake()
    await until(lambda: rig.outlet.by)  # B's send, once it is back
    assert rig.outlet.by == [(B, "在的", "b1")]  # the quote in B's own id


async def test_a_responder_s_message_goes_through_the_account_that_answered(rig: Rig) -> None:
    trigger = await seen_by_both(rig, "复读", "2")
    rig.book.answered_by(trigger.stream_id, B)
    words = (Segment(SegmentKind.TEXT, text="复读"),)
    await rig.sender.send(OutgoingMessage(1, trigger.stream_id, words, origin=Origin.RESPONDER))
    await until(lambda: rig.outlet.by)
    assert rig.outlet.by == [(B, "复读", None)]


async def test_a_responder_s_message_names_the_account_of_the_message_it_acts_on(
    rig: Rig,
) -> None:
    trigger = await seen_by_both(rig, "戳一下", "3")
    rig.book.answered_by(trigger.stream_id, A)  # a later message went to A meanwhile
    words = (Segment(SegmentKind.TEXT, text="回你"),)
    message = OutgoingMessage(1, trigger.stream_id, words, origin=Origin.RESPONDER, account=B)
    await rig.sender.send(message)
    await until(lambda: rig.outlet.by)
    assert rig.outlet.by == [(B, "回你", None)]
