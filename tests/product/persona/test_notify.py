"""Telling the owners of a blacklisting on a real store, outbox, job table and a local mail
server: a private message to each owner, then a check that e-mails only when none of them was
sent, a log line when no mail server is set up, and a refused mail that makes the job retry."""

from __future__ import annotations

import asyncio
import itertools
import socket
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
from loguru import logger
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import HISTORY_UNREADABLE, Capability, SentLookup
from pallas.core.inbound import Segment, StreamKey, StreamKind
from pallas.platform.smtp import MailNotSent, SmtpConfig
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery, OutboxDispatcher
from pallas.product.conversation.delivery.pacing import DeliveryPolicy
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.persona.notify import (
    CHECK_KIND,
    NotifyDeps,
    blacklist_notice,
    check_notice,
    notify_owners,
)
from pallas.product.persona.watch import NOTIFY_KIND
from pallas.store.jobs import ClaimedJob, JobStore
from pallas.store.ledger import LedgerWriter
from pallas.store.models import Job
from pallas.store.outbox import OutboxStatus, OutboxStore
from tests.support.fake_smtp import FakeSmtpServer
from tests.support.inbound import BOT_ID
from tests.support.waiting import until_async

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OWNERS = ("1", "2")
CHECK_AFTER_S = 120.0
SUBJECT = "Pallas：有人被自动拉黑"
PAYLOAD = {
    "stream_id": 1,
    "platform": "qq",
    "self_id": BOT_ID,
    "group": "500",
    "user_id": "42",
    "name": "小明",
}
POLICY = DeliveryPolicy(
    min_pause_s=0,
    max_pause_s=0,
    stream_interval_s=0,
    global_per_second=1e6,
    max_attempts=3,
    backoff_base_s=0.01,
    backoff_max_s=0.02,
)
_platform_ids = itertools.count(9_000_000)


@dataclass
class Outlet:
    """The chat platform, answering every send with a receipt."""

    sent: list[tuple[str, str]] = field(default_factory=list)

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None:
        self.sent.append((stream.external_id, segments[0].text))
        return str(next(_platform_ids))

    async def poke(self, stream: StreamKey, user_id: str) -> bool:
        return True

    async def react(self, stream: StreamKey, platform_message_id: str, reaction: str) -> bool:
        return True

    async def capabilities(self, self_id: str) -> frozenset[Capability]:
        return frozenset()

    async def is_connected(self, self_id: str) -> bool:
        return True

    async def find_sent(self, stream: StreamKey, text: str, since: datetime) -> SentLookup:
        return HISTORY_UNREADABLE


@dataclass
class Kit:
    engine: AsyncEngine
    outbox: OutboxStore
    dispatcher: OutboxDispatcher
    outlet: Outlet
    jobs: Jobs
    deps: NotifyDeps
    now: list[datetime]
    started: bool = False
    notified: ClaimedJob | None = None  # the last notify job run

    def with_smtp(self, smtp: SmtpConfig) -> None:
        self.deps.smtp = smtp  # the registered handlers hold these deps too

    async def claim(self, kind: str) -> ClaimedJob:
        [job] = await self.jobs.store.claim(
            "test", self.now[0], lease=timedelta(minutes=5), limit=10
        )
        assert job.kind == kind
        return job

    async def notify(self) -> ClaimedJob:
        """The blacklisting's job, run by its handler; the check job it left, claimed when due."""
        await self.jobs.enqueue(NOTIFY_KIND, PAYLOAD, key="persona.notify_owners:1:7")
        job = self.notified = await self.claim(NOTIFY_KIND)
        await notify_owners(job, self.deps)
        await self.jobs.store.finish(job.id, "test", self.now[0])
        self.now[0] += timedelta(seconds=CHECK_AFTER_S)
        return await self.claim(CHECK_KIND)

    async def drained(self, timeout: float = 10.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while await self.outbox.open_count():
            assert loop.time() < deadline, "outbox did not drain"
            await asyncio.sleep(0.01)


def smtp_at(port: int) -> SmtpConfig:
    return SmtpConfig(
        host="127.0.0.1",
        port=port,
        sender="pallas@example.com",
        recipients=("owner@example.com", "second@example.com"),
        starttls=False,
    )


@pytest.fixture
async def kit(engine: AsyncEngine, ledger: LedgerWriter) -> AsyncIterator[Kit]:
    now = [T0]
    outbox, outlet = OutboxStore(engine), Outlet()
    dispatcher = OutboxDispatcher(outbox, outlet, ledger, POLICY, lambda: now[0])
    jobs = Jobs(JobStore(engine), lambda: now[0], idle_s=0.2)  # its clock jumps: look often
    deps = NotifyDeps(
        engine=engine,
        sender=OutboxDelivery(outbox, dispatcher, lambda: now[0]),
        outbox=outbox,
        jobs=jobs,
        owners=OWNERS,
        smtp=SmtpConfig(host=""),
        action_ids=itertools.count(1).__next__,
        clock=lambda: now[0],
        check_after_s=lambda: CHECK_AFTER_S,
    )
    kit = Kit(engine, outbox, dispatcher, outlet, jobs, deps, now)
    jobs.handle(NOTIFY_KIND, partial(notify_owners, deps=deps))
    jobs.handle(CHECK_KIND, partial(check_notice, deps=deps))
    yield kit
    if kit.started:
        await dispatcher.stop()


def test_the_notice_names_the_group_the_person_and_the_way_to_forgive() -> None:
    text = blacklist_notice(PAYLOAD)
    assert "群 500" in text
    assert "小明（42）" in text
    assert "/解除拉黑 500 42" in text


async def test_each_owner_gets_a_private_message_queued_once(kit: Kit) -> None:
    check = await kit.notify()
    heads = await kit.outbox.heads()
    text = blacklist_notice(PAYLOAD)
    rows = sorted(heads, key=lambda row: row.stream.external_id)
    assert [(row.stream, row.payload["text"], row.status) for row in rows] == [
        (StreamKey("qq", BOT_ID, StreamKind.PRIVATE, owner), text, "pending") for owner in OWNERS
    ]
    assert sorted(check.payload["outbox_ids"]) == sorted(row.id for row in heads)
    assert check.payload["text"] == text
    assert check.due_at == T0 + timedelta(seconds=CHECK_AFTER_S)

    # The job run again (a crash before it finished): nothing is queued twice.
    assert kit.notified is not None
    await notify_owners(replace(kit.notified, attempts=2), kit.deps)
    assert len(await kit.outbox.heads()) == 2
    assert await kit.outbox.open_count() == 2
    counts = await kit.jobs.store.counts()
    assert (counts["running"], counts["pending"]) == (1, 0)  # the one check, claimed


async def test_no_mail_when_an_owner_got_the_message(kit: Kit) -> None:
    async with FakeSmtpServer() as smtp:
        kit.with_smtp(smtp_at(smtp.port))
        check = await kit.notify()
        kit.dispatcher.start()
        kit.started = True
        await kit.drained()
        assert sorted(owner for owner, _ in kit.outlet.sent) == sorted(OWNERS)
        statuses = await kit.outbox.statuses(check.payload["outbox_ids"])
        assert set(statuses.values()) == {OutboxStatus.SENT.value}
        await check_notice(check, kit.deps)
    assert smtp.messages == []


async def test_one_sent_message_is_enough(kit: Kit) -> None:
    async with FakeSmtpServer() as smtp:
        kit.with_smtp(smtp_at(smtp.port))
        check = await kit.notify()
        first, second = check.payload["outbox_ids"]
        await kit.outbox.mark_sending([first], kit.now[0])
        await kit.outbox.mark_sent([(first, "p-1")], kit.now[0])
        await kit.outbox.mark(second, OutboxStatus.FAILED, kit.now[0])
        assert await kit.outbox.statuses([first, second]) == {first: "sent", second: "failed"}
        await check_notice(check, kit.deps)
    assert smtp.messages == []


@pytest.mark.parametrize("status", [None, OutboxStatus.FAILED], ids=["still queued", "failed"])
async def test_a_mail_when_no_owner_got_the_message(kit: Kit, status: OutboxStatus | None) -> None:
    async with FakeSmtpServer() as smtp:
        kit.with_smtp(smtp_at(smtp.port))
        check = await kit.notify()
        if status is not None:
            for row in check.payload["outbox_ids"]:
                await kit.outbox.mark(row, status, kit.now[0])
        await check_notice(check, kit.deps)
    [mail] = smtp.messages
    assert mail["Subject"] == SUBJECT
    assert mail["From"] == "pallas@example.com"
    assert mail["To"] == "owner@example.com, second@example.com"
    assert mail.get_content().strip() == blacklist_notice(PAYLOAD)
    [envelope] = smtp.envelopes
    assert envelope.mail_from == "pallas@example.com"
    assert envelope.rcpt_to == ("owner@example.com", "second@example.com")


async def test_without_a_mail_server_the_notice_goes_to_the_log(kit: Kit) -> None:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="WARNING")
    try:
        check = await kit.notify()
        await check_notice(check, kit.deps)  # no error
    finally:
        logger.remove(sink)
    assert len(lines) == 1
    assert "no e-mail is set up" in lines[0]
    assert blacklist_notice(PAYLOAD) in lines[0]


async def test_a_mail_server_that_refuses_makes_the_check_retry(kit: Kit) -> None:
    async with FakeSmtpServer() as smtp:
        smtp.refuse = True
        kit.with_smtp(smtp_at(smtp.port))
        check = await kit.notify()
        with pytest.raises(MailNotSent, match="SMTPSenderRefused"):
            await check_notice(check, kit.deps)
        assert smtp.messages == []
        # The server takes mail again: the retried check sends it.
        smtp.refuse = False
        await check_notice(check, kit.deps)
    assert [mail["Subject"] for mail in smtp.messages] == [SUBJECT]


async def test_an_unreachable_mail_server_makes_the_check_retry(kit: Kit) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kit.with_smtp(smtp_at(port))
    check = await kit.notify()
    with pytest.raises(MailNotSent):
        await check_notice(check, kit.deps)


async def test_the_jobs_worker_retries_a_refused_mail_until_it_goes(kit: Kit) -> None:
    """Both jobs through the real worker: the notice queued, the check failing while the mail
    server refuses, retried with backoff, and done once the mail went."""
    async with FakeSmtpServer() as smtp:
        smtp.refuse = True
        kit.with_smtp(smtp_at(smtp.port))
        await kit.jobs.start()
        try:
            await kit.jobs.enqueue(NOTIFY_KIND, PAYLOAD, key="persona.notify_owners:1:8")
            await until_async(lambda: _status(kit, CHECK_KIND, "pending"), timeout=15)
            assert await kit.outbox.open_count() == 2  # the owners' messages wait, unsent
            kit.now[0] += timedelta(seconds=CHECK_AFTER_S)
            await until_async(lambda: _attempted(kit, CHECK_KIND), timeout=15)
            [check] = await kit.jobs.store.open_with_key_prefix(CHECK_KIND)
            assert (check.status, check.attempts) == ("pending", 1)
            assert "MailNotSent" in check.last_error
            assert smtp.messages == []

            smtp.refuse = False
            kit.now[0] += timedelta(hours=1)  # past any backoff
            await until_async(lambda: _status(kit, CHECK_KIND, "done"), timeout=15)
        finally:
            await kit.jobs.stop()
    assert [mail["Subject"] for mail in smtp.messages] == [SUBJECT]


async def _status(kit: Kit, kind: str, status: str) -> bool:
    query = select(func.count()).where(Job.kind == kind, Job.status == status)
    async with kit.engine.connect() as conn:
        return bool(await conn.scalar(query))


async def _attempted(kit: Kit, kind: str) -> bool:
    rows = await kit.jobs.store.open_with_key_prefix(kind)
    return any(row.attempts >= 1 and row.status == "pending" for row in rows)
