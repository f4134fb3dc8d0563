"""The job worker on a real store: success, retries, timeouts, unknown kinds, crashes."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.conversation.jobs.worker import JobHandler, JobWorker, default_holder
from pallas.store.engine import create_engine
from pallas.store.jobs import ClaimedJob, JobRow, JobStore
from tests.support.waiting import until

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=2)


@dataclass
class Clock:
    """The worker's clock, moved by the test (leases, backoff); timeouts run on the loop."""

    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Rig:
    store: JobStore
    clock: Clock = field(default_factory=Clock)
    workers: list[JobWorker] = field(default_factory=list)

    async def worker(self, handlers: dict[str, JobHandler], **options: Any) -> JobWorker:
        settings: dict[str, Any] = {
            "lease": LEASE,
            "timeout_s": 0.5,
            "idle_s": 0.01,
            "stop_grace_s": 0.05,
        }
        worker = JobWorker(self.store, handlers, self.clock, **(settings | options))
        self.workers.append(worker)
        await worker.start()
        return worker

    async def job(self, job_id: int) -> JobRow:
        row = await self.store.get(job_id)
        assert row is not None
        return row

    async def reaches(self, job_id: int, status: str, attempts: int, timeout: float = 10) -> JobRow:
        """Wait until the job has this status after this many attempts (fails on timeout)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            row = await self.job(job_id)
            if (row.status, row.attempts) == (status, attempts):
                return row
            assert loop.time() < deadline, f"job {job_id} is {row.status}/{row.attempts}"
            await asyncio.sleep(0.01)


@pytest.fixture
async def rig(engine: AsyncEngine) -> AsyncIterator[Rig]:
    rig = Rig(JobStore(engine))
    yield rig
    for worker in rig.workers:
        await worker.stop()


def recorder(calls: list[ClaimedJob]) -> JobHandler:
    async def handle(job: ClaimedJob) -> None:
        calls.append(job)

    return handle


def raising(calls: list[ClaimedJob]) -> JobHandler:
    async def handle(job: ClaimedJob) -> None:
        calls.append(job)
        raise RuntimeError("boom")

    return handle


def hanging(entered: list[int]) -> JobHandler:
    async def handle(job: ClaimedJob) -> None:
        entered.append(job.id)
        await asyncio.Event().wait()  # never set

    return handle


async def test_a_job_that_succeeds_is_done(rig: Rig) -> None:
    calls: list[ClaimedJob] = []
    await rig.worker({"greet": recorder(calls)})
    ref = await rig.store.enqueue("greet", {"to": "群友"}, T0)
    row = await rig.reaches(ref.id, "done", 1)
    assert [(job.id, job.payload) for job in calls] == [(ref.id, {"to": "群友"})]
    assert (row.last_error, row.lease_expires_at) == ("", None)


async def test_a_failing_handler_is_retried_with_backoff_then_failed(rig: Rig) -> None:
    failures: list[ClaimedJob] = []
    successes: list[ClaimedJob] = []
    await rig.worker({"flaky": raising(failures), "fine": recorder(successes)})
    flaky = await rig.store.enqueue("flaky", {}, T0, max_attempts=3)
    fine = await rig.store.enqueue("fine", {}, T0)
    first = await rig.reaches(flaky.id, "pending", 1)
    assert (first.due_at, first.last_error) == (T0 + timedelta(seconds=5), "RuntimeError('boom')")
    await rig.reaches(fine.id, "done", 1)  # the failure holds nobody up
    rig.clock.advance(5)
    second = await rig.reaches(flaky.id, "pending", 2)
    assert second.due_at == rig.clock.now + timedelta(seconds=10)  # doubled
    rig.clock.advance(10)
    last = await rig.reaches(flaky.id, "failed", 3)
    assert last.last_error == "RuntimeError('boom')"
    assert [job.attempts for job in failures] == [1, 2, 3]
    after = await rig.store.enqueue("fine", {}, rig.clock.now)
    await rig.reaches(after.id, "done", 1)  # the worker goes on


async def test_a_hanging_handler_times_out_and_is_retried_then_failed(rig: Rig) -> None:
    entered: list[int] = []
    await rig.worker({"stuck": hanging(entered)}, timeouts={"stuck": 0.05}, backoff_base_s=1)
    ref = await rig.store.enqueue("stuck", {}, T0, max_attempts=2)
    first = await rig.reaches(ref.id, "pending", 1)
    assert first.last_error == "timed out after 0.05 s"
    rig.clock.advance(1)
    last = await rig.reaches(ref.id, "failed", 2)
    assert last.last_error == "timed out after 0.05 s"
    assert entered == [ref.id, ref.id]


async def test_a_handler_raising_timeout_error_itself_is_not_reported_as_timed_out(
    rig: Rig,
) -> None:
    async def handle(job: ClaimedJob) -> None:
        raise TimeoutError("upstream")

    await rig.worker({"call": handle})
    ref = await rig.store.enqueue("call", {}, T0, max_attempts=1)
    row = await rig.reaches(ref.id, "failed", 1)
    assert row.last_error == "TimeoutError('upstream')"


async def test_a_job_of_an_unknown_kind_fails_at_once(rig: Rig) -> None:
    await rig.worker({})
    ref = await rig.store.enqueue("mystery", {}, T0, max_attempts=5)
    row = await rig.reaches(ref.id, "failed", 1)
    assert row.last_error == "no handler for kind mystery"


async def test_no_job_runs_twice_even_with_two_workers(rig: Rig, engine: AsyncEngine) -> None:
    runs: Counter[int] = Counter()
    active: set[int] = set()
    overlaps: list[int] = []
    most: dict[str, int] = {"w1": 0, "w2": 0}
    busy: dict[str, int] = {"w1": 0, "w2": 0}

    def tracked(holder: str) -> JobHandler:
        async def handle(job: ClaimedJob) -> None:
            if job.id in active:
                overlaps.append(job.id)
            active.add(job.id)
            busy[holder] += 1
            most[holder] = max(most[holder], busy[holder])
            runs[job.id] += 1
            await asyncio.sleep(0.001)
            busy[holder] -= 1
            active.discard(job.id)

        return handle

    ids = [(await rig.store.enqueue("work", {"i": i}, T0)).id for i in range(40)]
    await rig.worker({"work": tracked("w1")}, holder="w1", concurrency=4)
    # A second process: its own store (no shared lock), the same database.
    other = Rig(JobStore(engine), rig.clock, rig.workers)
    await other.worker({"work": tracked("w2")}, holder="w2", concurrency=4)
    await until(lambda: sum(runs.values()) >= 40)
    for job_id in ids:
        await rig.reaches(job_id, "done", 1)
    assert runs == Counter(ids) and overlaps == []
    assert max(most.values()) <= 4


async def test_stop_leaves_an_interrupted_job_running_for_the_next_worker(rig: Rig) -> None:
    entered: list[int] = []
    first = await rig.worker({"long": hanging(entered)}, holder="old", timeout_s=1.0)
    ref = await rig.store.enqueue("long", {}, T0)
    await until(lambda: entered == [ref.id])
    await first.stop()
    row = await rig.job(ref.id)
    assert (row.status, row.lease_holder, row.attempts) == ("running", "old", 1)
    completed: list[ClaimedJob] = []
    second = await rig.worker({"long": recorder(completed)}, holder="new", timeout_s=1.0)
    assert row.lease_expires_at is not None
    rig.clock.now = row.lease_expires_at  # the lease is still good at its last instant
    second.wake()
    await asyncio.sleep(0.1)
    assert completed == []
    rig.clock.advance(1)
    second.wake()
    done = await rig.reaches(ref.id, "done", 2)
    assert [job.id for job in completed] == [ref.id] and done.lease_holder == "new"
    assert entered == [ref.id]


class FlakyStore(JobStore):
    """A store whose first settle-and-claim calls raise, as a dropped database connection
    would; with `settling_only`, only the calls that settle finished jobs do."""

    def __init__(self, engine: AsyncEngine, failures: int, *, settling_only: bool = False):
        super().__init__(engine)
        self.failures = failures
        self.settling_only = settling_only

    async def finish_and_claim(
        self,
        holder: str,
        now: datetime,
        finished: Sequence[int],
        *,
        lease: timedelta,
        limit: int,
    ) -> tuple[list[int], list[ClaimedJob]]:
        if self.failures > 0 and (finished or not self.settling_only):
            self.failures -= 1
            raise ConnectionError("database went away")
        return await super().finish_and_claim(holder, now, finished, lease=lease, limit=limit)


async def test_a_store_error_in_the_loop_does_not_stop_the_worker(
    rig: Rig, engine: AsyncEngine
) -> None:
    store = FlakyStore(engine, failures=3)
    calls: list[ClaimedJob] = []
    await Rig(store, rig.clock, rig.workers).worker({"greet": recorder(calls)})
    ref = await store.enqueue("greet", {}, T0)
    await rig.reaches(ref.id, "done", 1)
    assert store.failures == 0 and [job.id for job in calls] == [ref.id]


async def test_a_success_whose_settling_failed_is_marked_done_later_not_run_again(
    rig: Rig, engine: AsyncEngine
) -> None:
    store = FlakyStore(engine, failures=2, settling_only=True)
    calls: list[ClaimedJob] = []
    await Rig(store, rig.clock, rig.workers).worker({"greet": recorder(calls)})
    ref = await store.enqueue("greet", {}, T0)
    await rig.reaches(ref.id, "done", 1)
    assert store.failures == 0 and [job.id for job in calls] == [ref.id]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param({"lease": timedelta(seconds=60)}, "lease", id="lease not above timeout"),
        pytest.param(
            {"lease": timedelta(seconds=90), "timeouts": {"slow": 120.0}},
            "lease",
            id="lease not above a kind's timeout",
        ),
        pytest.param({"concurrency": 0}, "concurrency", id="no slot"),
        pytest.param({"timeout_s": 0.0}, "timeouts", id="no time"),
        pytest.param({"holder": "h" * 65}, "holder", id="holder too long"),
    ],
)
def test_invalid_settings_are_refused(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'unused.db'}")  # never connects
    with pytest.raises(ValueError, match=message):
        JobWorker(JobStore(engine), {}, Clock(), **options)


def test_the_default_holder_is_unique_per_worker_and_fits_the_column() -> None:
    holders = {default_holder() for _ in range(20)}
    assert len(holders) == 20 and all(len(h) <= 64 for h in holders)


async def test_at_start_up_a_running_job_is_released_only_where_the_bot_is_alone(
    rig: Rig, engine: AsyncEngine
) -> None:
    """SQLite's file lock makes the bot the store's only process: the last run's jobs are
    taken again at once. On PostgreSQL a running job may be another live process's: its lease
    must expire first."""
    entered: list[int] = []
    first = await rig.worker({"long": hanging(entered)}, holder="other", timeout_s=1.0)
    ref = await rig.store.enqueue("long", {}, T0)
    await until(lambda: entered == [ref.id])
    await first.stop()
    jobs = Jobs(rig.store, lambda: rig.clock.now)
    try:
        await jobs.start()
        await jobs.stop()
    finally:
        row = await rig.job(ref.id)
    alone = engine.dialect.name == "sqlite"
    assert rig.store.alone is alone
    assert row.lease_expires_at is not None
    assert (row.lease_expires_at < rig.clock.now) is alone  # released, or still the other's
