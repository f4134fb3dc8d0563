"""Jobs benchmark: a backlog of durable jobs drained by the job worker, per backend.

For each backend a fresh database is migrated to head and `--jobs` jobs are enqueued one by
one through `JobStore.enqueue` (each with its own idempotency key, all due at once; each call
timed). Then `--solo-claims` claims are timed one at a time with nothing else running, by a
holder that dies at once (one `now` for all, a 2 s lease): the worker claims those jobs again
after their lease, the crash path. Then a `JobWorker` (`--concurrency` slots, the bot's
default lease and timeout) drains everything with a trivial handler that counts its
invocations per job. Every `claim` of the worker is timed, with its wait for the store's write
lock and its time holding it (the transaction) apart; `finish` is timed too.

Backends: SQLite on a temporary file, always. PostgreSQL on the server at `--pg-url` (or
PALLAS_BENCH_PG_URL), where a throwaway database is created and dropped; without a URL, a
throwaway server is started from the local binaries as the store tests do
(tests/support/postgres.py); `--no-pg` skips it.

Checks: every job's handler ran exactly once, never twice at the same time, and every job
ended `done`. Target: claim p99 <= 5 ms (alone, and in the worker), printed PASS or MISS.

Run from the repository root: `.venv/bin/python bench/jobs_bench.py [--jobs 10000]
[--concurrency 8] [--solo-claims 200] [--pg-url URL | --no-pg] [--loop uvloop|asyncio]`.
Exits 1 on a correctness problem (a job run twice or left unfinished); speed figures only
print.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import asyncpg  # noqa: E402
from sqlalchemy import func, select  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402
from sqlalchemy.ext.asyncio import AsyncEngine  # noqa: E402

from bench.logs import capture_warnings, print_logged  # noqa: E402
from bench.loops import add_loop_option, pick_runner  # noqa: E402
from bench.machine import machine_line  # noqa: E402
from bench.stats import fmt, percentile, verdict  # noqa: E402
from pallas.product.conversation.jobs.worker import JobWorker  # noqa: E402
from pallas.store.database import Database  # noqa: E402
from pallas.store.engine import create_engine  # noqa: E402
from pallas.store.jobs import ClaimedJob, JobStore  # noqa: E402
from pallas.store.migrate import upgrade_to_head  # noqa: E402
from pallas.store.models import Job  # noqa: E402
from tests.support.postgres import PostgresServer, postgres_bin_dir  # noqa: E402

KIND = "bench"
CLAIM_P99_TARGET_MS = 5.0
DRAIN_TIMEOUT_S = 900.0
PG_ENV = "PALLAS_BENCH_PG_URL"
SOLO_LEASE = timedelta(seconds=2)  # the solo claims' holder "dies"; the worker waits this out


# Statistics -----------------------------------------------------------------------------------


def timing_row(label: str, ms: list[float]) -> str:
    ms = sorted(ms)
    return (
        f"  {label:50}{len(ms):>7}{fmt(percentile(ms, 50), 3):>9}{fmt(percentile(ms, 99), 3):>9}"
        f"{fmt(ms[-1] if ms else math.nan, 3):>9}"
    )


# The run --------------------------------------------------------------------------------------


CALL: ContextVar[str] = ContextVar("call", default="")


class TimingLock(asyncio.Lock):
    """The store's write lock, noting how long claims wait for it and hold it (ms)."""

    def __init__(self) -> None:
        super().__init__()
        self.wait_ms: list[float] = []
        self.hold_ms: list[float] = []
        self._since = 0.0

    async def acquire(self) -> Literal[True]:
        t0 = time.perf_counter()
        await super().acquire()
        self._since = time.perf_counter()
        if CALL.get() == "claim":
            self.wait_ms.append((self._since - t0) * 1000)
        return True

    def release(self) -> None:
        if CALL.get() == "claim":
            self.hold_ms.append((time.perf_counter() - self._since) * 1000)
        super().release()


class TimedStore(JobStore):
    """The worker's store, keeping the wall time of every claim and finish (ms)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.lock = TimingLock()
        Database.use_lock(engine, self.lock)
        super().__init__(engine)
        self.claim_ms: list[float] = []
        self.claimed: list[int] = []  # jobs per claim call
        self.finish_ms: list[float] = []
        self.finished = 0
        self.all_finished = asyncio.Event()
        self.expected = 0

    async def finish_and_claim(
        self, holder: str, now: datetime, finished: Sequence[int], **kwargs: Any
    ) -> tuple[list[int], list[ClaimedJob]]:
        """The worker settles what ended and claims in one call: timed as its claim."""
        token = CALL.set("claim")
        t0 = time.perf_counter()
        try:
            done, jobs = await super().finish_and_claim(holder, now, finished, **kwargs)
        finally:
            CALL.reset(token)
        elapsed = (time.perf_counter() - t0) * 1000
        if kwargs.get("limit", 0) > 0:
            self.claim_ms.append(elapsed)
            self.claimed.append(len(jobs))
        if finished:
            self.finish_ms.append(len(done))  # jobs marked done by this call
        self.finished += len(done)
        if self.expected and self.finished >= self.expected:
            self.all_finished.set()
        return done, jobs


@dataclass
class Handler:
    """Counts invocations per job and notes any job entered while already running."""

    runs: Counter[int] = field(default_factory=Counter)
    active: set[int] = field(default_factory=set)
    overlaps: int = 0

    async def __call__(self, job: ClaimedJob) -> None:
        if job.id in self.active:
            self.overlaps += 1
        self.active.add(job.id)
        self.runs[job.id] += 1
        await asyncio.sleep(0)
        self.active.discard(job.id)


@dataclass
class Solo:
    """Claims made one at a time with nothing else running, over the whole backlog."""

    ms: list[float]
    jobs: list[int]  # the jobs they took (their holder then "dies")


@dataclass
class Drain:
    drained: bool
    seconds: float
    cpu_s: float
    claim_ms: list[float]
    claimed: list[int]  # jobs per claim call
    lock_wait_ms: list[float]  # of each claim
    lock_hold_ms: list[float]  # of each claim: its transaction
    finish_ms: list[float]


@dataclass
class Result:
    backend: str
    jobs: int
    enqueue_ms: list[float]
    enqueue_s: float
    solo: Solo
    drain: Drain
    statuses: dict[str, int]
    attempts: Counter[int]  # jobs by attempts made
    ran_twice: int
    never_ran: int
    overlaps: int
    reclaimed_wrong: int  # solo-claimed jobs not run exactly once more after their lease

    @property
    def problems(self) -> int:
        unfinished = self.jobs - self.statuses.get("done", 0)
        wrong = self.ran_twice + self.never_ran + self.overlaps + self.reclaimed_wrong
        return wrong + unfinished + (not self.drain.drained)


def utc_now() -> datetime:
    return datetime.now(UTC)


async def enqueue_all(store: JobStore, jobs: int) -> tuple[list[int], list[float], float]:
    ids, ms = [], []
    start = time.perf_counter()
    for i in range(jobs):
        t0 = time.perf_counter()
        ref = await store.enqueue(KIND, {"i": i}, utc_now(), key=f"bench:{i}")
        ms.append((time.perf_counter() - t0) * 1000)
        ids.append(ref.id)
    return ids, ms, time.perf_counter() - start


async def solo_claims(store: JobStore, calls: int, limit: int) -> Solo:
    """`calls` claims in a row by a holder that dies at once: all at one `now`, so none of
    them re-claims another's jobs; the worker claims them again when the lease expires."""
    now, ms, jobs = utc_now(), [], []
    for _ in range(calls):
        t0 = time.perf_counter()
        claimed = await JobStore.claim(store, "bench-dead", now, lease=SOLO_LEASE, limit=limit)
        ms.append((time.perf_counter() - t0) * 1000)
        jobs += [job.id for job in claimed]
    return Solo(ms, jobs)


async def drain(store: TimedStore, handler: Handler, concurrency: int) -> Drain:
    worker = JobWorker(store, {KIND: handler}, utc_now, concurrency=concurrency)
    cpu0, t0 = time.process_time(), time.perf_counter()
    await worker.start()
    try:
        await asyncio.wait_for(store.all_finished.wait(), timeout=DRAIN_TIMEOUT_S)
        drained = True
    except TimeoutError:
        drained = False
    seconds, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    await worker.stop()
    lock = store.lock
    return Drain(
        drained,
        seconds,
        cpu_s,
        store.claim_ms,
        store.claimed,
        lock.wait_ms,
        lock.hold_ms,
        store.finish_ms,
    )


async def attempts_made(engine: AsyncEngine) -> Counter[int]:
    query = select(Job.attempts, func.count()).group_by(Job.attempts)
    async with engine.connect() as conn:
        return Counter({attempts: n for attempts, n in (await conn.execute(query)).all()})


async def run_backend(backend: str, url: str, args: argparse.Namespace) -> Result:
    engine = create_engine(url)
    try:
        await upgrade_to_head(engine)
        store = TimedStore(engine)
        ids, enqueue_ms, enqueue_s = await enqueue_all(store, args.jobs)
        solo = await solo_claims(store, args.solo_claims, args.concurrency)
        for timings in (store.claim_ms, store.claimed, store.lock.wait_ms, store.lock.hold_ms):
            timings.clear()  # the solo claims are reported apart, from their own timings
        store.expected = args.jobs
        handler = Handler()
        drained = await drain(store, handler, args.concurrency)
        runs = handler.runs
        return Result(
            backend,
            args.jobs,
            enqueue_ms,
            enqueue_s,
            solo,
            drained,
            await store.counts(),
            await attempts_made(engine),
            sum(1 for job_id in ids if runs[job_id] > 1),
            sum(1 for job_id in ids if runs[job_id] == 0),
            handler.overlaps,
            sum(1 for job_id in solo.jobs if runs[job_id] != 1),
        )
    finally:
        await engine.dispose()


def report(r: Result, concurrency: int) -> None:
    print(f"\n-- {r.backend}: {r.jobs} jobs, worker concurrency {concurrency} --")
    print(
        f"  enqueue: {fmt(r.enqueue_s, 2)} s ({fmt(r.jobs / r.enqueue_s, 0)} jobs/s, one "
        "transaction each, a key each)"
    )
    print(f"  {'(ms)':50}{'calls':>7}{'p50':>9}{'p99':>9}{'max':>9}")
    print(timing_row("enqueue()", r.enqueue_ms))
    print(timing_row(f"claim() alone, limit {concurrency}, backlog pending", r.solo.ms))
    d = r.drain
    print(timing_row("claim() in the worker", d.claim_ms))
    print(timing_row("  of which waiting for the write lock", d.lock_wait_ms))
    print(timing_row("  of which holding it (the transaction)", d.lock_hold_ms))
    settled = d.finish_ms
    per = sum(settled) / len(settled) if settled else 0.0
    print(f"  finishes: marked done with the next claim, {per:.1f} jobs per claim on average")
    report_drain(r)
    solo_p99 = percentile(sorted(r.solo.ms), 99)
    p99 = percentile(sorted(d.claim_ms), 99)
    print(
        f"  claim p99 alone {fmt(solo_p99, 3)} ms   {verdict(solo_p99 <= CLAIM_P99_TARGET_MS)}; "
        f"in the worker {fmt(p99, 3)} ms   {verdict(p99 <= CLAIM_P99_TARGET_MS)} "
        f"(target <= {fmt(CLAIM_P99_TARGET_MS, 1)} ms)"
    )
    print(
        f"  checks: statuses {r.statuses}; jobs by attempts {dict(sorted(r.attempts.items()))}; "
        f"ran twice {r.ran_twice}; never ran {r.never_ran}; entered while running "
        f"{r.overlaps}; lease-expired jobs not run exactly once {r.reclaimed_wrong}   "
        f"{'OK' if not r.problems else 'WRONG'}"
    )


def report_drain(r: Result) -> None:
    d = r.drain
    if not d.drained:
        print(f"  WRONG: the drain did not finish within {fmt(DRAIN_TIMEOUT_S, 0)} s")
    taken = [n for n in d.claimed if n]
    print(
        f"  drain: {fmt(d.seconds, 2)} s from start() to the last finish "
        f"({fmt(r.jobs / d.seconds, 0)} jobs/s); process CPU {fmt(d.cpu_s, 2)} s "
        f"({fmt(d.cpu_s / r.jobs * 1000, 3)} ms per job); {len(d.claim_ms)} claims, "
        f"{len(taken)} took jobs ({fmt(sum(taken) / max(len(taken), 1), 2)} on average); "
        f"{len(r.solo.jobs)} jobs taken by the solo claims re-claimed after their lease"
    )


# PostgreSQL -----------------------------------------------------------------------------------


async def _admin(url: str, sql: str) -> None:
    parsed = make_url(url)
    conn = await asyncpg.connect(
        host=parsed.host,
        port=parsed.port,
        user=parsed.username,
        password=parsed.password,
        database=parsed.database or "postgres",
    )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@asynccontextmanager
async def pg_database(admin_url: str) -> AsyncIterator[str]:
    """A throwaway database on the server at `admin_url`."""
    name = f"pallas_jobs_bench_{os.getpid()}"
    await _admin(admin_url, f'CREATE DATABASE "{name}"')
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        await _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}"')


async def run_pg(admin_url: str, args: argparse.Namespace) -> Result:
    async with pg_database(admin_url) as url:
        return await run_backend("postgresql", url, args)


# Entry ----------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs enqueued and run")
    parser.add_argument("--concurrency", type=int, default=8, help="worker slots")
    parser.add_argument(
        "--solo-claims", type=int, default=200, help="claims timed alone before the worker"
    )
    parser.add_argument(
        "--pg-url",
        default=os.environ.get(PG_ENV, ""),
        help=f"PostgreSQL server (SQLAlchemy URL; default ${PG_ENV}, else a throwaway server)",
    )
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    add_loop_option(parser)
    args = parser.parse_args(argv)
    if min(args.jobs, args.concurrency) < 1 or args.solo_claims < 0:
        parser.error("--jobs and --concurrency must be positive, --solo-claims not negative")
    return args


def run_all(args: argparse.Namespace, runner: Any) -> list[Result]:
    results = []
    with tempfile.TemporaryDirectory(prefix="pallas-jobs-bench-") as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'jobs.db'}"
        results.append(runner(run_backend("sqlite", url, args)))
        report(results[-1], args.concurrency)
    if args.no_pg:
        return results
    if args.pg_url:
        results.append(runner(run_pg(args.pg_url, args)))
    elif postgres_bin_dir() is not None:
        server = PostgresServer().start()
        try:
            results.append(runner(run_pg(server.admin_url, args)))
        finally:
            server.stop()
    else:
        print(f"\n-- postgresql: skipped (no --pg-url, no ${PG_ENV}, no local server binaries)")
        return results
    report(results[-1], args.concurrency)
    return results


def main() -> None:
    args = parse_args()
    logged = capture_warnings()
    loop_name, runner = pick_runner(args.loop)
    print(machine_line("at start", loop_name))
    print(f"jobs benchmark  {args.jobs} jobs, concurrency {args.concurrency}")
    results = run_all(args, runner)
    print_logged(logged)
    print(f"\n{machine_line('at end', loop_name)}")
    sys.exit(1 if any(r.problems for r in results) else 0)


if __name__ == "__main__":
    main()
