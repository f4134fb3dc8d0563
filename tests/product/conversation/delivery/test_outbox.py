"""The outbox and its dispatcher on a real store: order, receipts, retries, outages, crashes."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import HISTORY_UNREADABLE, Capability, SentLookup
from pallas.core.inbound import Segment, SegmentKind, Sender, StreamKey
from pallas.platform.onebot.send import own_message
from pallas.product.conversation.delivery.contract import OutgoingReply
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery, OutboxDispatcher
from pallas.product.conversation.delivery.pacing import DeliveryPolicy, PolicyReader
from pallas.product.conversation.delivery.safety import Screened
from pallas.store.ledger import LedgerWriter
from pallas.store.models import Event, Message, OutboxItem, Reply
from pallas.store.outbox import NewItem, OutboxStatus, OutboxStore
from pallas.store.timeline import TimelineWriter
from tests.support.inbound import group, message, private
from tests.support.waiting import TIMEOUT_S

POLICY = DeliveryPolicy(
    min_pause_s=0,
    max_pause_s=0,
    stream_interval_s=0,
    global_per_second=1e6,
    max_attempts=3,
    backoff_base_s=0.01,
    backoff_max_s=0.02,
)
_ids = itertools.count(7_000_000)


@dataclass
class Outlet:
    connected: bool = True
    failures: int = 0  # refuse this many sends first
    sent: list[tuple[str, str, str | None]] = field(default_factory=list)
    attempts: int = 0
    history: SentLookup = HISTORY_UNREADABLE  # what find_sent answers
    history_asked: int = 0

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None:
        self.attempts += 1
        if self.failures > 0:
            self.failures -= 1
            return None
        self.sent.append((stream.external_id, segments[0].text, quote))
        return str(next(_ids))

    async def poke(self, stream: StreamKey, user_id: str) -> bool:
        self.sent.append((stream.external_id, f"poke:{user_id}", None))
        return True

    async def react(self, stream: StreamKey, platform_message_id: str, reaction: str) -> bool:
        return True

    async def capabilities(self, self_id: str) -> frozenset[Capability]:
        return frozenset()

    async def is_connected(self, self_id: str) -> bool:
        return self.connected

    async def find_sent(self, stream: StreamKey, text: str, since: datetime) -> SentLookup:
        self.history_asked += 1
        return self.history


@dataclass
class Kit:
    engine: AsyncEngine
    store: OutboxStore
    ledger: LedgerWriter
    timeline: TimelineWriter
    outlet: Outlet
    clock: Callable[[], datetime]
    dispatcher: OutboxDispatcher | None = None

    def start(self, policy: DeliveryPolicy | PolicyReader = POLICY) -> OutboxDispatcher:
        self.dispatcher = OutboxDispatcher(self.store, self.outlet, self.ledger, policy, self.clock)
        self.dispatcher.start()
        return self.dispatcher

    async def stream_id(self, external: str) -> int:
        written = await self.timeline.write(own_message(group(external), (), f"seed{external}", T0))
        return written.stream_id  # type: ignore[union-attr]

    async def reply(
        self, stream: str, *bubbles: str, quote: str | None = None, direct: bool = False
    ) -> list[int]:
        assert self.dispatcher is not None
        delivery = OutboxDelivery(self.store, self.dispatcher, self.clock)
        sid = await self.stream_id(stream)
        reply = OutgoingReply(1, sid, group(stream), bubbles, quote, direct)
        report = await delivery.deliver(reply)
        return list(report.queued)

    async def statuses(self) -> list[tuple[str, int]]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(OutboxItem.status, OutboxItem.attempts))
            return [(r.status, r.attempts) for r in rows]

    async def events(self, kind: str) -> list[Event]:
        await self.ledger.flush()
        async with self.engine.connect() as conn:
            query = select(Event).where(Event.kind == kind).order_by(Event.id)
            return list((await conn.execute(query)).all())


T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture
async def kit(engine: AsyncEngine) -> AsyncIterator[Kit]:
    ledger, timeline = LedgerWriter(engine), TimelineWriter(engine)
    ledger.start()
    timeline.start()
    kit = Kit(engine, OutboxStore(engine), ledger, timeline, Outlet(), lambda: datetime.now(UTC))
    yield kit
    if kit.dispatcher is not None:
        await kit.dispatcher.stop()
    await ledger.close()
    await timeline.close()


async def drained(kit: Kit, timeout: float = TIMEOUT_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while await kit.store.open_count():
        assert loop.time() < deadline, "outbox did not drain"
        await asyncio.sleep(0.01)


async def test_a_reply_is_committed_with_its_rows_and_sent_in_order(kit: Kit) -> None:
    kit.start()
    ids = await kit.reply("g1", "第一句", "第二句", "第三句", quote="555")
    await drained(kit)
    assert kit.outlet.sent == [
        ("g1", "第一句", "555"),
        ("g1", "第二句", None),
        ("g1", "第三句", None),
    ]
    async with kit.engine.connect() as conn:
        [reply] = (await conn.execute(select(Reply))).all()
        rows = (await conn.execute(select(OutboxItem).order_by(OutboxItem.id))).all()
    assert reply.bubbles == ["第一句", "第二句", "第三句"]
    assert [r.id for r in rows] == ids and all(r.reply_id == reply.id for r in rows)
    assert all(r.status == "sent" and r.platform_message_id for r in rows)
    delivered = await kit.events("delivered")
    assert [e.payload["outbox_id"] for e in delivered] == ids


async def test_while_disconnected_rows_wait_without_spending_attempts(kit: Kit) -> None:
    kit.outlet.connected = False
    kit.start()
    await kit.reply("g2", "等我上线", "再说")
    await asyncio.sleep(0.3)
    assert kit.outlet.attempts == 0
    assert await kit.statuses() == [("pending", 0), ("pending", 0)]
    kit.outlet.connected = True
    await drained(kit)
    assert [text for _, text, _ in kit.outlet.sent] == ["等我上线", "再说"]


async def test_failures_retry_with_backoff_and_keep_the_order(kit: Kit) -> None:
    kit.outlet.failures = 2
    kit.start()
    await kit.reply("g3", "一", "二")
    await drained(kit)
    assert [text for _, text, _ in kit.outlet.sent] == ["一", "二"]
    assert await kit.statuses() == [("sent", 2), ("sent", 0)]
    assert len(await kit.events("delivery_retry")) == 2


async def test_a_row_that_keeps_failing_becomes_delivery_failed(kit: Kit) -> None:
    kit.outlet.failures = 100
    kit.start()
    await kit.reply("g4", "发不出去")
    await drained(kit)
    assert await kit.statuses() == [("failed", 3)]
    [failed] = await kit.events("delivery_failed")
    assert failed.reason == "message" and failed.payload["attempts"] == 3


async def test_a_stale_reply_is_expired_not_sent(kit: Kit) -> None:
    late = [T0]
    kit.clock = lambda: late[0]
    kit.start(DeliveryPolicy(min_pause_s=0, max_pause_s=0, stale_after_s=60))
    kit.outlet.connected = False
    await kit.reply("g5", "过时的话")
    late[0] = T0 + timedelta(minutes=5)
    kit.outlet.connected = True
    kit.dispatcher.wake()  # type: ignore[union-attr]
    await drained(kit)
    assert kit.outlet.sent == []
    assert await kit.statuses() == [("expired", 0)]
    assert [e.kind for e in await kit.events("delivery_expired")] == ["delivery_expired"]


async def test_pacing_changed_in_the_console_applies_to_the_next_reply_and_send(kit: Kit) -> None:
    late, pacing = [T0], [POLICY]
    kit.clock = lambda: late[0]
    dispatcher = kit.start(lambda: pacing[0])
    kit.outlet.connected = False
    await kit.reply("g6", "早就排着的话")
    # What the console saves, the dispatcher reads at its next send (settings/delivery_section).
    pacing[0] = replace(POLICY, min_pause_s=2.5, max_pause_s=2.5, stale_after_s=60)
    await kit.reply("g7", "一", "二")
    async with kit.engine.connect() as conn:
        query = select(OutboxItem.payload).order_by(OutboxItem.id)
        payloads = (await conn.execute(query)).scalars().all()
    assert [payload["pause_s"] for payload in payloads] == [0, 0, 2.5]  # the new typing pause
    late[0] = T0 + timedelta(minutes=5)  # older than the new limit, younger than the old
    kit.outlet.connected = True
    dispatcher.wake()
    await drained(kit)
    assert await kit.statuses() == [("expired", 0)] * 3


async def interrupted(kit: Kit, stream: str, text: str, created: datetime) -> int:
    """A row the previous process marked `sending` and never finished."""
    sid = await kit.stream_id(stream)
    queued = await OutboxStore(kit.engine).enqueue(1, sid, [_item(text)], created, bubbles=(text,))
    [row_id] = queued.ids
    await kit.store.mark(row_id, OutboxStatus.SENDING, created)
    return row_id


def _item(text: str) -> NewItem:
    return NewItem("message", {"text": text, "pause_s": 0})


async def test_interrupted_sends_are_resolved_before_anything_new_goes_out(kit: Kit) -> None:
    now = datetime.now(UTC)
    echoed = await interrupted(kit, "r1", "已经发出去的", now - timedelta(seconds=5))
    await kit.timeline.write(
        own_message(group("r1"), (Segment(SegmentKind.TEXT, text="已经发出去的"),), "echo1", now)
    )
    young = await interrupted(kit, "r2", "刚要发的", now - timedelta(seconds=5))
    old = await interrupted(kit, "r3", "很久以前的", now - timedelta(minutes=5))
    dispatcher = OutboxDispatcher(kit.store, kit.outlet, kit.ledger, POLICY, kit.clock)
    counts = await dispatcher.recover()
    assert counts == {"confirmed": 1, "resend": 1, "unknown": 1}
    kit.dispatcher = dispatcher
    dispatcher.start()
    await drained(kit)
    assert [text for _, text, _ in kit.outlet.sent] == ["刚要发的"]  # never the others
    async with kit.engine.connect() as conn:
        rows = dict((await conn.execute(select(OutboxItem.id, OutboxItem.status))).all())
    assert (rows[echoed], rows[young], rows[old]) == ("sent", "sent", "unknown")
    reasons = [e.reason for e in await kit.events("delivery_recovered")]
    assert sorted(reasons) == ["confirmed", "resend", "unknown"]


async def test_an_echo_already_claimed_by_another_row_is_not_taken_for_this_one(kit: Kit) -> None:
    now = datetime.now(UTC)
    sid = await kit.stream_id("r4")
    queued = await kit.store.enqueue(
        1,
        sid,
        [_item("哈哈哈"), _item("哈哈哈")],
        now - timedelta(seconds=5),
        bubbles=("哈哈哈",) * 2,
    )
    first, second = queued.ids
    echo = (Segment(SegmentKind.TEXT, text="哈哈哈"),)
    await kit.timeline.write(own_message(group("r4"), echo, "first-echo", now))
    await kit.store.mark(first, OutboxStatus.SENT, now, platform_message_id="first-echo")
    await kit.store.mark(second, OutboxStatus.SENDING, now)
    dispatcher = OutboxDispatcher(kit.store, kit.outlet, kit.ledger, POLICY, kit.clock)
    assert await dispatcher.recover() == {"confirmed": 0, "resend": 1, "unknown": 0}


@dataclass
class EchoingOutlet(Outlet):
    """Sends (NapCat reports the message) but the receipt never arrives."""

    timeline: TimelineWriter | None = None

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None:
        self.attempts += 1
        assert self.timeline is not None
        platform_id = str(next(_ids))
        await self.timeline.write(own_message(stream, tuple(segments), platform_id, T0))
        self.sent.append((stream.external_id, segments[0].text, quote))
        return None


async def test_a_lost_receipt_with_the_platforms_report_is_not_sent_again(kit: Kit) -> None:
    kit.outlet = EchoingOutlet(timeline=kit.timeline)
    kit.start()
    await kit.reply("g6", "只说一次")
    await drained(kit)
    assert [text for _, text, _ in kit.outlet.sent] == ["只说一次"]
    assert await kit.statuses() == [("sent", 0)]
    [delivered] = await kit.events("delivered")
    assert delivered.payload["echo"] is True


@dataclass
class StallingOutlet(Outlet):
    """The first call is never answered."""

    stalls: int = 1

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None:
        if self.stalls > 0:
            self.stalls -= 1
            self.attempts += 1
            await asyncio.sleep(3600)
        return await super().send(stream, segments, quote)


async def test_a_call_that_is_never_answered_is_given_up_and_retried(kit: Kit) -> None:
    kit.outlet = StallingOutlet()
    policy = DeliveryPolicy(
        min_pause_s=0, max_pause_s=0, stream_interval_s=0, send_timeout_s=0.2, backoff_base_s=0.01
    )
    kit.start(policy)
    await kit.reply("g7", "迟到的话")
    await drained(kit)
    assert [text for _, text, _ in kit.outlet.sent] == ["迟到的话"]
    assert await kit.statuses() == [("sent", 1)]


async def test_a_row_left_mid_send_while_running_is_resolved_not_resent_blindly(kit: Kit) -> None:
    now = datetime.now(UTC)
    young = await interrupted(kit, "m1", "刚才没记上", now - timedelta(seconds=2))
    old = await interrupted(kit, "m2", "早就没记上", now - timedelta(minutes=2))
    kit.start()  # no start-up recovery: the running dispatcher meets the rows itself
    await drained(kit)
    assert [text for _, text, _ in kit.outlet.sent] == ["刚才没记上"]
    async with kit.engine.connect() as conn:
        rows = dict((await conn.execute(select(OutboxItem.id, OutboxItem.status))).all())
    assert (rows[young], rows[old]) == ("sent", "unknown")


async def test_a_crowded_chat_drops_its_oldest_waiting_unsolicited_replies(kit: Kit) -> None:
    kit.outlet.connected = False  # an outage: everything queues
    kit.start()
    await kit.reply("bp1", "第一", "第一续")  # the head: it may have begun, never dropped
    await kit.reply("bp1", "第二")
    await kit.reply("bp1", "第三")
    await kit.reply("bp1", "第四")  # a third unsolicited one waiting: the oldest goes
    await kit.reply("bp1", "点名回答", direct=True)  # and every waiting unsolicited one
    await kit.reply("bp1", "第五")  # two may wait behind a direct reply again
    dropped = await kit.events("delivery_dropped")
    assert [e.reason for e in dropped] == ["queue_full", "superseded", "superseded"]
    kit.outlet.connected = True
    assert kit.dispatcher is not None
    kit.dispatcher.wake()
    await drained(kit)
    assert [text for _, text, _ in kit.outlet.sent] == ["第一", "第一续", "点名回答", "第五"]
    statuses = sorted(status for status, _ in await kit.statuses())
    assert statuses == ["dropped"] * 3 + ["sent"] * 4


async def test_a_direct_reply_is_never_dropped_and_never_waits_behind_chatter(kit: Kit) -> None:
    kit.outlet.connected = False
    kit.start()
    await kit.reply("bp2", "闲聊一")
    for i in range(5):
        await kit.reply("bp2", f"回答{i}", direct=True)
    await kit.reply("bp2", "闲聊二")
    await kit.reply("bp2", "闲聊三")
    await kit.reply("bp2", "闲聊四")  # three unsolicited behind the head: one too many
    assert [e.reason for e in await kit.events("delivery_dropped")] == ["queue_full"]
    kit.outlet.connected = True
    assert kit.dispatcher is not None
    kit.dispatcher.wake()
    await drained(kit)
    texts = [text for _, text, _ in kit.outlet.sent]
    assert texts == ["闲聊一", *[f"回答{i}" for i in range(5)], "闲聊三", "闲聊四"]


async def test_an_interrupted_send_waits_for_the_platform_history_and_follows_it(kit: Kit) -> None:
    now = datetime.now(UTC)
    old = now - timedelta(minutes=5)  # past the blind-resend bound: only the history can tell
    kit.outlet.connected = False
    absent = await interrupted(kit, "h1", "没发出去", old)
    dispatcher = OutboxDispatcher(kit.store, kit.outlet, kit.ledger, POLICY, kit.clock)
    assert await dispatcher.recover() == {"confirmed": 0, "resend": 0, "unknown": 0}
    assert ("sending", 0) in await kit.statuses()  # waits: nothing to ask yet
    kit.outlet.connected = True
    kit.outlet.history = SentLookup(answered=True)  # NapCat: no such message
    kit.dispatcher = dispatcher
    dispatcher.start()
    await drained(kit)
    assert [text for _, text, _ in kit.outlet.sent] == ["没发出去"]
    found = await interrupted(kit, "h2", "发出去了", old)
    kit.outlet.history = SentLookup(answered=True, platform_message_id="h2-id")
    dispatcher.wake()
    await drained(kit)
    assert [text for _, text, _ in kit.outlet.sent] == ["没发出去"]  # not sent again
    async with kit.engine.connect() as conn:
        rows = dict(
            (await conn.execute(select(OutboxItem.id, OutboxItem.platform_message_id))).all()
        )
    assert rows[found] == "h2-id" and rows[absent] is not None
    recovered = await kit.events("delivery_recovered")
    assert [(e.reason, e.payload["history"]) for e in recovered] == [
        ("resend", "absent"),
        ("confirmed", "found"),
    ]


async def _stored(kit: Kit, stream: str, text: str, *, from_bot: bool, at: datetime) -> None:
    """A message in the timeline, stored at `at` (the writer stamps now; set it after)."""
    segments = (Segment(SegmentKind.TEXT, text=text),)
    msg = own_message(group(stream), segments, f"m{next(_ids)}", at)
    if not from_bot:
        msg = replace(msg, sender=Sender(user_id="42"), from_bot=False)
    written = await kit.timeline.write(msg)
    async with kit.engine.begin() as conn:
        await conn.execute(
            update(Message).where(Message.id == written.message_id).values(stored_at=at)  # type: ignore[union-attr]
        )


@pytest.mark.parametrize(
    ("case", "from_bot", "stored_after_s"),
    [
        ("a member said the same words after the send began", False, 2),
        ("the bot said the same words before this send began", True, -2),
        ("the same words between the row's creation and its send", True, -30),
    ],
)
async def test_only_the_bots_own_report_of_this_send_counts_as_its_echo(
    kit: Kit, case: str, from_bot: bool, stored_after_s: float
) -> None:
    now = datetime.now(UTC)
    began = now - timedelta(seconds=10)
    row = await interrupted(kit, "e1", "好的", now - timedelta(seconds=50))  # queued a while
    await kit.store.mark(row, OutboxStatus.SENDING, began)  # ... and its send began later
    await _stored(
        kit, "e1", "好的", from_bot=from_bot, at=began + timedelta(seconds=stored_after_s)
    )
    dispatcher = OutboxDispatcher(kit.store, kit.outlet, kit.ledger, POLICY, kit.clock)
    counts = await dispatcher.recover()  # history unreadable: only the echo could confirm it
    assert counts["confirmed"] == 0, case


@dataclass
class CrowdOutlet(Outlet):
    """Holds each send until `release` is set; notes how many were in the platform's hands
    at once and the rows' statuses the moment the first call arrived."""

    engine: AsyncEngine | None = None
    release: asyncio.Event = field(default_factory=asyncio.Event)
    in_flight: int = 0
    most_in_flight: int = 0
    statuses_at_first_call: list[str] = field(default_factory=list)
    fail_chat: str = ""

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None:
        if self.engine is not None and not self.statuses_at_first_call:
            async with self.engine.connect() as conn:
                query = select(OutboxItem.status).order_by(OutboxItem.id)
                self.statuses_at_first_call = list((await conn.execute(query)).scalars())
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await self.release.wait()
        await asyncio.sleep(0.01)  # a platform call takes time, even once released
        self.in_flight -= 1
        if stream.external_id == self.fail_chat and self.failures > 0:
            self.failures -= 1
            self.attempts += 1
            return None
        return await super().send(stream, segments, quote)


async def test_heads_of_different_chats_are_handed_over_together_each_chat_in_order(
    kit: Kit,
) -> None:
    outlet = CrowdOutlet(engine=kit.engine)
    kit.outlet = outlet
    kit.outlet.connected = False  # queue everything first, then let it go at once
    kit.start()
    for chat in ("p1", "p2", "p3"):
        await kit.reply(chat, f"{chat}-一", f"{chat}-二")
    outlet.connected = True
    kit.dispatcher.wake()  # type: ignore[union-attr]
    while outlet.in_flight < 3:
        await asyncio.sleep(0.01)
    outlet.release.set()
    await drained(kit)
    assert outlet.most_in_flight == 3
    # Every head of the batch was committed `sending` before the first platform call.
    assert outlet.statuses_at_first_call == ["sending", "pending"] * 3
    for chat in ("p1", "p2", "p3"):
        assert [t for c, t, _ in outlet.sent if c == chat] == [f"{chat}-一", f"{chat}-二"]
    assert len(await kit.events("delivered")) == 6


async def test_at_most_parallel_sends_go_together_and_a_failure_retries_alone(kit: Kit) -> None:
    outlet = CrowdOutlet(fail_chat="q2", failures=1)
    outlet.release.set()
    kit.outlet = outlet
    kit.outlet.connected = False
    kit.start(replace(POLICY, parallel_sends=2))
    for chat in ("q1", "q2", "q3"):
        await kit.reply(chat, f"{chat}-一", f"{chat}-二")
    outlet.connected = True
    kit.dispatcher.wake()  # type: ignore[union-attr]
    await drained(kit)
    assert outlet.most_in_flight == 2
    for chat in ("q1", "q2", "q3"):
        assert [t for c, t, _ in outlet.sent if c == chat] == [f"{chat}-一", f"{chat}-二"]
    assert sorted(await kit.statuses()) == [("sent", 0)] * 5 + [("sent", 1)]
    [retry] = await kit.events("delivery_retry")
    assert retry.payload["attempts"] == 1


@dataclass
class TimedOutlet(Outlet):
    """Notes when each send reached the platform (the account pace is a rate over time)."""

    times: list[float] = field(default_factory=list)

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None:
        self.times.append(asyncio.get_running_loop().time())
        return await super().send(stream, segments, quote)


# The account window with 0.4 s for a minute, 5 a "minute" (the hour is the pure tests').
ACCOUNT = replace(POLICY, account_per_minute=5, account_per_hour=0, minute_s=0.4)


async def test_one_account_across_many_groups_leaves_no_faster_than_its_windows(kit: Kit) -> None:
    kit.outlet = TimedOutlet()
    kit.start(ACCOUNT)
    for n in range(20):  # 20 answers to @ across 7 groups (never dropped), queued at once
        await kit.reply(f"a{n % 7}", f"第{n}条", direct=True)
    await drained(kit, timeout=TIMEOUT_S + 30)
    times = sorted(kit.outlet.times)
    assert len(times) == 20
    # The gate counts a send when it reserves it; the platform sees it a few ms later, so the
    # windows are read a little shorter than they are.
    window = ACCOUNT.minute_s * 0.75
    for i, at in enumerate(times):
        in_minute = [t for t in times[i:] if t < at + window]
        assert len(in_minute) <= 5, f"{len(in_minute)} sends within one window"
    assert times[19] - times[0] >= 3 * ACCOUNT.minute_s * 0.75  # four minutes' worth of 5


async def test_an_accounts_last_hour_survives_a_restart(kit: Kit) -> None:
    policy = replace(POLICY, account_per_minute=3, minute_s=1.0)
    kit.outlet = TimedOutlet()
    first = kit.start(policy)
    for n in range(3):
        await kit.reply(f"r{n}", f"重启前{n}", direct=True)
    await drained(kit)
    await first.stop()
    second = kit.start(policy)
    await second.recover()  # as the runtime does at every start
    await kit.reply("r9", "重启后")
    await drained(kit)
    assert kit.outlet.times[3] - kit.outlet.times[0] >= 1.0 - 0.05  # the window, kept


async def test_a_members_qq_number_leaves_masked_but_to_themselves(kit: Kit) -> None:
    member = "778899001"
    await kit.timeline.write(message("我是新来的", stream=group("n1"), user_id=member))
    kit.start()
    await kit.reply("n1", f"他的号是 {member}，房间号 987654321")
    delivery = OutboxDelivery(kit.store, kit.dispatcher, kit.clock)  # type: ignore[arg-type]
    mine = await kit.timeline.write(own_message(private(member), (), "seed-private", T0))
    sid = mine.stream_id  # type: ignore[union-attr]
    reply = OutgoingReply(2, sid, private(member), (f"你的号是 {member}",), None, True)
    await delivery.deliver(reply)
    await drained(kit)
    sent = {text for _, text, _ in kit.outlet.sent}
    assert sent == {"他的号是 [已隐藏]，房间号 987654321", f"你的号是 {member}"}
    [rewritten] = await kit.events("outgoing_rewritten")
    assert rewritten.reason == "member_id"


def no_group_ads(payload: dict[str, Any], _origin: str | None) -> Screened:
    """A feature's check: refuses invitations to other groups, marks the rest as seen."""
    if "加群" in payload["text"]:
        return Screened(None, ("ad",))
    return Screened({**payload, "text": payload["text"]})


def broken(_payload: dict[str, Any], _origin: str | None) -> Screened:
    raise RuntimeError("a check with a bug")


async def test_a_features_check_refuses_after_the_screen_and_a_broken_one_refuses_too(
    kit: Kit,
) -> None:
    dispatcher = kit.start()
    dispatcher.add_check(no_group_ads)
    await kit.reply("c1", "欢迎加群 12345", direct=True)
    await kit.reply("c2", "今天天气不错", direct=True)
    await drained(kit)
    assert [text for _, text, _ in kit.outlet.sent] == ["今天天气不错"]
    [blocked] = await kit.events("outgoing_blocked")
    assert blocked.reason == "ad"
    dispatcher.add_check(broken)
    await kit.reply("c3", "这句会被拦下", direct=True)
    await drained(kit)
    assert [text for _, text, _ in kit.outlet.sent] == ["今天天气不错"]
    assert [e.reason for e in await kit.events("outgoing_blocked")] == ["ad", "check_failed"]
