"""A daily reminder over a clock moved by hand, on the real store: said once a day, a run
again after a crash (a new firing, a new store) says nothing twice, and a cancelled one says
nothing (docs/tasks.md, "Exactly once")."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.local_time import SHANGHAI
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery, OutboxDispatcher
from pallas.product.conversation.gate.policy import GatePolicy
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.tasks.firing import REMIND_KIND, ReminderFiring
from pallas.product.tasks.setting import Asker, quiet_refusal, set_reminder
from pallas.product.tasks.store import ReminderStore
from pallas.product.tasks.when import Refused, When, read_when
from pallas.store.jobs import ClaimedJob, JobStore
from pallas.store.ledger import LedgerWriter
from pallas.store.models import Job, OutboxItem
from pallas.store.outbox import OutboxStore
from pallas.store.timeline import TimelineWriter
from tests.product.conversation.delivery.test_outbox import POLICY, Outlet
from tests.support.inbound import group, message

START = datetime(2026, 12, 4, 21, 30, tzinfo=SHANGHAI)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def firing(engine: AsyncEngine, jobs: Jobs, clock: Clock) -> ReminderFiring:
    """What a (re)started bot builds: nothing of the last run's memory."""
    ledger = LedgerWriter(engine)
    dispatcher = OutboxDispatcher(OutboxStore(engine), Outlet(), ledger, POLICY, clock)
    sender = OutboxDelivery(OutboxStore(engine), dispatcher, clock)
    return ReminderFiring(ReminderStore(engine), jobs, sender, lambda: 1, clock, engine)


async def run_due(engine: AsyncEngine, fire: ReminderFiring, clock: Clock) -> int:
    """Claim and run every reminder job due by now, as the worker does; how many ran."""
    jobs = await JobStore(engine).claim("test", clock.now, lease=timedelta(minutes=1), limit=10)
    for job in jobs:
        await fire(job)
        await JobStore(engine).finish(job.id, "test", clock.now)
    return len(jobs)


async def count(engine: AsyncEngine, model: type) -> int:
    async with engine.connect() as conn:
        return int(await conn.scalar(select(func.count()).select_from(model)) or 0)


async def test_a_daily_reminder_is_said_once_a_day_across_restarts(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    stored = await writer.write(message("每天8点提醒我吃药", stream=group("800")))
    clock = Clock()
    jobs = Jobs(JobStore(engine), clock)
    fire = firing(engine, jobs, clock)
    jobs.handle(REMIND_KIND, fire)
    when = read_when("每天8点", clock.now, SHANGHAI)
    assert isinstance(when, When)
    asker = Asker(stored.stream_id, stored.person_id, "42", "10000")
    await set_reminder(ReminderStore(engine), jobs, asker, when, "吃药", clock.now)

    clock.now = datetime(2026, 12, 5, 7, 59, tzinfo=SHANGHAI)
    assert await run_due(engine, fire, clock) == 0  # not yet
    said = []
    for day in (5, 6, 7):
        clock.now = datetime(2026, 12, day, 8, 0, 5, tzinfo=SHANGHAI)
        assert await run_due(engine, fire, clock) == 1
        said.append(await count(engine, OutboxItem))
        # The bot restarts and the same day's job runs again (its lease ran out mid-run).
        again = firing(engine, jobs, clock)
        async with engine.connect() as conn:
            today = (await conn.execute(select(Job).where(Job.kind == REMIND_KIND)
                                        .order_by(Job.id.desc()).offset(1).limit(1))).first()
        payload = {"reminder_id": 1, "due": datetime(2026, 12, day, 8, 0, tzinfo=SHANGHAI)
                   .isoformat()}  # fmt: skip
        assert today is not None and today.payload == payload
        await again(_claimed(today))
        assert await count(engine, OutboxItem) == said[-1]  # nothing twice
    assert said == [1, 2, 3]  # one a day
    assert await count(engine, Job) == 4  # three said, the fourth waits for the 8th
    # Cancelled: its waiting job runs on the 8th and says nothing.
    assert await ReminderStore(engine).cancel(1, stored.person_id, clock.now)
    clock.now = datetime(2026, 12, 8, 8, 0, 5, tzinfo=SHANGHAI)
    assert await run_due(engine, fire, clock) == 1
    assert await count(engine, OutboxItem) == 3


def _claimed(row: Any) -> ClaimedJob:
    return ClaimedJob(row.id, row.kind, dict(row.payload), row.idempotency_key, 2, 5, row.due_at)


async def test_a_group_reminder_in_its_quiet_hours_is_refused_in_one_sentence(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    stored = await writer.write(message("明早6点提醒我", stream=group("801")))
    clock = Clock()
    jobs = Jobs(JobStore(engine), clock)
    jobs.handle(REMIND_KIND, firing(engine, jobs, clock))
    asker = Asker(stored.stream_id, stored.person_id, "42", "10000")
    night = GatePolicy(quiet_hours=("23:00-07:00",))

    async def quiet(_stream_id: int, _now: datetime) -> GatePolicy | None:
        return night

    for said, refused in (("明早6点", True), ("每天23点30分", True), ("明早7点", False)):
        when = read_when(said, clock.now, SHANGHAI)
        assert isinstance(when, When)
        done = await set_reminder(ReminderStore(engine), jobs, asker, when, "起床", clock.now,
                                  quiet)  # fmt: skip
        assert isinstance(done, Refused) is refused, said
        if refused:
            assert done.reason == ("群里 23:00-07:00 是安静时段，那时候不在群里提醒；"
                                   "换个时间，或者私聊我设。")  # fmt: skip
    assert quiet_refusal(read_when("明早6点", clock.now, SHANGHAI), None) is None  # type: ignore[arg-type]
    assert await count(engine, Job) == 1  # only 7:00 was kept
