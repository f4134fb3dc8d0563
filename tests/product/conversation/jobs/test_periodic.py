"""Periodic jobs: fire times, validation, scheduling across restarts, and runs by the worker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.jobs.periodic import (
    EPOCH,
    PeriodicJob,
    ensure_scheduled,
    fire_of,
    next_fire,
    periodic_key,
)
from pallas.product.conversation.jobs.worker import JobWorker
from pallas.store.engine import create_engine
from pallas.store.jobs import ClaimedJob, JobStore

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # a Tuesday


def utc(day: int, hour: int, minute: int = 0, second: int = 0, micro: int = 0) -> datetime:
    return datetime(2026, 12, day, hour, minute, second, micro, tzinfo=UTC)


def every(**delta: float) -> PeriodicJob:
    return PeriodicJob("tick", "tick", every=timedelta(**delta))


def cron(expr: str) -> PeriodicJob:
    return PeriodicJob("tick", "tick", cron=expr)


# --- fire times --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("job", "after", "fire"),
    [
        pytest.param(every(hours=1), utc(1, 12), utc(1, 13), id="on a fire: strictly after"),
        pytest.param(every(hours=1), utc(1, 12, 30), utc(1, 13), id="hourly, mid-hour"),
        pytest.param(every(minutes=15), utc(1, 12, 7, 30), utc(1, 12, 15), id="quarter hours"),
        pytest.param(
            every(minutes=15), utc(1, 12, 14, 59, 999_999), utc(1, 12, 15), id="a tick before"
        ),
        pytest.param(every(days=1), utc(1, 23, 59, 59), utc(2, 0), id="daily at UTC midnight"),
        pytest.param(every(seconds=90), utc(1, 12, 0, 1), utc(1, 12, 1, 30), id="90 s"),
        pytest.param(
            every(minutes=7),
            EPOCH + timedelta(minutes=7 * 1000, seconds=1),
            EPOCH + timedelta(minutes=7 * 1001),
            id="7 min: multiples since the epoch",
        ),
        pytest.param(cron("*/15 * * * *"), utc(1, 12), utc(1, 12, 15), id="cron on a fire"),
        pytest.param(cron("*/15 * * * *"), utc(1, 12, 7), utc(1, 12, 15), id="cron between"),
        pytest.param(
            cron("*/15 * * * *"), utc(1, 12, 14, 59, 999_999), utc(1, 12, 15), id="cron tick"
        ),
        pytest.param(cron("0 8 * * *"), utc(1, 8), utc(2, 8), id="daily 08:00 UTC"),
        pytest.param(cron("30 2 * * mon"), utc(1, 0), utc(7, 2, 30), id="weekly"),
        pytest.param(
            cron("0 0 1 * *"),
            utc(15, 0),
            datetime(2027, 1, 1, tzinfo=UTC),
            id="monthly across a year",
        ),
    ],
)
def test_next_fire(job: PeriodicJob, after: datetime, fire: datetime) -> None:
    assert next_fire(job, after) == fire
    assert next_fire(job, after).tzinfo is not None


def test_every_gives_the_same_fire_times_whenever_it_is_asked() -> None:
    """Two processes, or one before and after a restart, agree on the fires (and keys)."""
    job = every(minutes=10)
    fires = {next_fire(job, T0 + timedelta(seconds=s)) for s in range(0, 600, 37)}
    assert fires == {utc(1, 12, 10)}


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(
            lambda: PeriodicJob("both", "k", every=timedelta(minutes=1), cron="* * * * *"),
            "exactly one",
            id="both every and cron",
        ),
        pytest.param(lambda: PeriodicJob("none", "k"), "exactly one", id="neither"),
        pytest.param(
            lambda: PeriodicJob("zero", "k", every=timedelta(0)), "positive", id="every zero"
        ),
        pytest.param(
            lambda: PeriodicJob("back", "k", every=timedelta(seconds=-5)),
            "positive",
            id="every negative",
        ),
        pytest.param(
            lambda: PeriodicJob("digest", "k", cron="61 * * * *"),
            "'digest': bad cron expression '61 \\* \\* \\* \\*'",
            id="minute out of range",
        ),
        pytest.param(
            lambda: PeriodicJob("digest", "k", cron="* * *"), "'digest'", id="three fields"
        ),
        pytest.param(
            lambda: PeriodicJob("feb30", "k", cron="0 0 30 2 *"), "never fires", id="never"
        ),
        pytest.param(
            lambda: PeriodicJob("a:b", "k", every=timedelta(minutes=1)), "name", id="colon"
        ),
        pytest.param(lambda: PeriodicJob("", "k", every=timedelta(minutes=1)), "name", id="empty"),
    ],
)
def test_invalid_periodic_jobs_are_refused(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]


def test_a_key_names_the_job_and_its_fire_time() -> None:
    job = PeriodicJob("digest", "digest", every=timedelta(hours=1))
    key = periodic_key(job, utc(1, 13))
    assert key == "periodic:digest:2026-12-01T13:00:00+00:00"
    assert fire_of(job, key) == utc(1, 13)
    other = PeriodicJob("digest2", "digest", every=timedelta(hours=1))
    assert fire_of(other, key) is None and fire_of(job, None) is None


# --- scheduling on a real store ----------------------------------------------------------


async def test_ensure_scheduled_creates_one_run_per_job_and_is_idempotent(
    engine: AsyncEngine,
) -> None:
    store = JobStore(engine)
    hourly = PeriodicJob("hourly", "digest", {"scope": "all"}, every=timedelta(hours=1))
    nightly = PeriodicJob("nightly", "cleanup", cron="0 3 * * *")
    created = await ensure_scheduled(store, [hourly, nightly], utc(1, 12, 20))
    assert len(created) == 2
    runs = {job.key: job for job in await store.open_with_key_prefix("periodic:")}
    assert set(runs) == {
        "periodic:hourly:2026-12-01T13:00:00+00:00",
        "periodic:nightly:2026-12-02T03:00:00+00:00",
    }
    first = runs["periodic:hourly:2026-12-01T13:00:00+00:00"]
    assert (first.kind, first.payload, first.due_at) == ("digest", {"scope": "all"}, utc(1, 13))
    # A restart, before the fire and after it (the run still pending): nothing new.
    assert await ensure_scheduled(store, [hourly, nightly], utc(1, 12, 40)) == []
    assert await ensure_scheduled(store, [hourly, nightly], utc(1, 14, 5)) == []
    assert (await store.counts())["pending"] == 2


class PeriodicRig:
    def __init__(self, engine: AsyncEngine) -> None:
        self.store = JobStore(engine)
        self.now = T0
        self.runs: list[ClaimedJob] = []
        self.worker: JobWorker | None = None

    async def start(self, job: PeriodicJob, *, fail: bool = False) -> JobWorker:
        async def handle(claimed: ClaimedJob) -> None:
            self.runs.append(claimed)
            if fail:
                raise RuntimeError("periodic boom")

        self.worker = JobWorker(
            self.store,
            {job.kind: handle},
            lambda: self.now,
            lease=timedelta(seconds=10),
            timeout_s=1.0,
            idle_s=0.01,
            backoff_base_s=0.0,
            periodic=[job],
        )
        await self.worker.start()
        return self.worker

    async def open_keys(self) -> list[str | None]:
        return [job.key for job in await self.store.open_with_key_prefix("periodic:")]

    async def settled(self, runs: int, open_key: str) -> None:
        """Wait until `runs` runs happened and the one open run is `open_key`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while len(self.runs) < runs or await self.open_keys() != [open_key]:
            assert loop.time() < deadline, f"{len(self.runs)} runs, open {await self.open_keys()}"
            await asyncio.sleep(0.01)


@pytest.fixture
async def periodic_rig(engine: AsyncEngine) -> AsyncIterator[PeriodicRig]:
    rig = PeriodicRig(engine)
    yield rig
    if rig.worker is not None:
        await rig.worker.stop()


MINUTELY = PeriodicJob("minutely", "tick", {"n": 1}, every=timedelta(minutes=1))


def minute_key(hour: int, minute: int) -> str:
    return periodic_key(MINUTELY, utc(1, hour, minute))


async def test_after_a_run_the_worker_enqueues_exactly_the_next_fire(
    periodic_rig: PeriodicRig,
) -> None:
    rig = periodic_rig
    worker = await rig.start(MINUTELY)
    assert await rig.open_keys() == [minute_key(12, 1)]
    rig.now = utc(1, 12, 1)
    worker.wake()
    await rig.settled(1, minute_key(12, 2))
    rig.now = utc(1, 12, 2, 30)  # a little late: the next fire is still 12:03
    worker.wake()
    await rig.settled(2, minute_key(12, 3))
    assert [run.key for run in rig.runs] == [minute_key(12, 1), minute_key(12, 2)]
    assert [run.payload for run in rig.runs] == [{"n": 1}, {"n": 1}]
    assert (await rig.store.counts())["done"] == 2


async def test_a_fire_missed_while_down_runs_once_then_the_next_is_in_the_future(
    periodic_rig: PeriodicRig,
) -> None:
    rig = periodic_rig
    await ensure_scheduled(rig.store, [MINUTELY], T0)  # scheduled, then the bot went down
    rig.now = utc(1, 15, 30, 20)  # three and a half hours later: some 210 fires missed
    await rig.start(MINUTELY)
    await rig.settled(1, minute_key(15, 31))
    await asyncio.sleep(0.1)  # give a burst the chance to show
    assert [run.key for run in rig.runs] == [minute_key(12, 1)]
    assert await rig.store.counts() == {"pending": 1, "running": 0, "done": 1, "failed": 0}


async def test_a_periodic_run_that_fails_for_good_still_schedules_the_next_fire(
    periodic_rig: PeriodicRig,
) -> None:
    rig = periodic_rig
    rig.now = utc(1, 12, 1)
    await ensure_scheduled(rig.store, [MINUTELY], T0)
    await rig.start(MINUTELY, fail=True)
    await rig.settled(5, minute_key(12, 2))  # five attempts (no backoff here), then the next
    assert (await rig.store.counts())["failed"] == 1


async def test_a_worker_refuses_periodic_jobs_it_cannot_run(tmp_path: Path) -> None:
    store = JobStore(create_engine(f"sqlite+aiosqlite:///{tmp_path / 'unused.db'}"))

    async def handle(job: ClaimedJob) -> None:
        return None

    with pytest.raises(ValueError, match="no handler for kind 'tick'"):
        JobWorker(store, {}, lambda: T0, periodic=[MINUTELY])
    twin = PeriodicJob("minutely", "tick", cron="* * * * *")
    with pytest.raises(ValueError, match="share a name"):
        JobWorker(store, {"tick": handle}, lambda: T0, periodic=[MINUTELY, twin])
