"""The job worker: claims due jobs under a lease and runs their handlers, a few at a time.

One background task claims; each claimed job runs in its own task under a timeout. Success
finishes the job; an exception or a timeout retries it with backoff until its attempts are
spent, then fails it. A handler that fails never stops the worker, nor does a store error.
If the process dies, its jobs stay `running` until their lease expires; then any worker
claims them again. So a handler may run more than once for one job (at least once): it must
be idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta

from loguru import logger

from pallas.product.conversation.jobs.periodic import (
    PeriodicJob,
    ensure_scheduled,
    fire_of,
    schedule_after_run,
)
from pallas.product.conversation.jobs.retry import idle_wait, retry_delay
from pallas.store.jobs import MAX_HOLDER_CHARS, ClaimedJob, JobStore

JobHandler = Callable[[ClaimedJob], Awaitable[None]]
# Nothing due: the worker sleeps until the next due time or an enqueue wakes it (Jobs
# wakes it on every enqueue); this slow look is a safety net.
IDLE_LOOK_S = 30.0
ERROR_RETRY_S = 1.0  # after a store hiccup: look again this soon


def default_holder() -> str:
    """Unique per process run: host, pid, and a random part (a pid is reused after a
    restart, and the old run's leases must not look like the new one's)."""
    host = socket.gethostname()[: MAX_HOLDER_CHARS - 24]
    return f"{host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class JobWorker:
    def __init__(
        self,
        store: JobStore,
        handlers: Mapping[str, JobHandler],
        clock: Callable[[], datetime],
        *,
        holder: str | None = None,
        lease: timedelta = timedelta(minutes=5),
        timeout_s: float = 60.0,
        timeouts: Mapping[str, float] | None = None,
        concurrency: int = 2,
        idle_s: float = IDLE_LOOK_S,
        backoff_base_s: float = 5.0,
        backoff_cap_s: float = 600.0,
        stop_grace_s: float = 5.0,
        periodic: Sequence[PeriodicJob] = (),
    ) -> None:
        self._store = store
        self._handlers = dict(handlers)
        self._clock = clock
        self.holder = holder or default_holder()
        self._lease = lease
        self._timeout_s = timeout_s
        self._timeouts = dict(timeouts or {})
        self._concurrency = concurrency
        self._idle_s = idle_s
        self._backoff = (backoff_base_s, backoff_cap_s)
        self._stop_grace_s = stop_grace_s
        self._periodic = {job.name: job for job in periodic}
        self._validate(periodic)
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._running: dict[int, asyncio.Task[None]] = {}
        self._finished: list[ClaimedJob] = []  # succeeded, not yet marked done

    def _validate(self, periodic: Sequence[PeriodicJob]) -> None:
        longest = max([self._timeout_s, *self._timeouts.values()])
        if self._lease.total_seconds() <= longest:
            raise ValueError(
                f"job lease ({self._lease}) must be longer than the longest timeout ({longest} s)"
            )
        if self._concurrency < 1 or self._idle_s <= 0 or longest <= 0:
            raise ValueError("job worker: concurrency must be >= 1, idle_s and timeouts > 0")
        if not 0 < len(self.holder) <= MAX_HOLDER_CHARS:
            raise ValueError(f"job worker: holder must be 1-{MAX_HOLDER_CHARS} characters")
        if len(self._periodic) != len(periodic):
            raise ValueError("job worker: two periodic jobs share a name")
        for job in periodic:
            if job.kind not in self._handlers:
                raise ValueError(f"periodic job {job.name!r}: no handler for kind {job.kind!r}")

    async def start(self) -> None:
        """Schedule the periodic jobs that have no open run, then start claiming."""
        await ensure_scheduled(self._store, list(self._periodic.values()), self._clock())
        self._task = asyncio.create_task(self._run(), name="job worker")

    async def stop(self) -> None:
        """Stop claiming; give running handlers `stop_grace_s`, then cancel them. Their jobs
        stay `running` and are claimed again once their lease expires."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await self._task
        running = list(self._running.values())
        if running:
            await self._wait_out(running)
        if self._finished:
            await self._settle_and_claim(self._clock(), 0)

    async def _wait_out(self, running: list[asyncio.Task[None]]) -> None:
        _, late = await asyncio.wait(running, timeout=self._stop_grace_s)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
        if late:
            logger.warning(
                "jobs: {} job(s) interrupted by stop; their lease will expire", len(late)
            )

    def wake(self) -> None:
        """Look for due jobs now (after an enqueue), not at the next idle tick."""
        self._wake.set()

    async def _run(self) -> None:
        while not self._stopping:
            self._wake.clear()  # before the tick: a wake-up during it is not lost
            try:
                delay = await self._tick()
            except Exception as exc:  # a store hiccup must not stop the jobs for good
                logger.opt(exception=exc).error("job worker: {!r}", exc)
                delay = min(self._idle_s, ERROR_RETRY_S)
            if delay <= 0:
                await asyncio.sleep(0)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)

    async def _tick(self) -> float:
        """Settle what ended and claim into the free slots (one transaction); the seconds
        to wait before looking again."""
        free = self._concurrency - len(self._running)
        if free <= 0 and not self._finished:
            return self._idle_s  # a handler ending wakes the loop
        now = self._clock()
        claimed = await self._settle_and_claim(now, max(0, free))
        if free <= 0:
            return self._idle_s
        for job in claimed:
            task = asyncio.create_task(self._execute(job), name=f"job {job.id}")
            self._running[job.id] = task
            task.add_done_callback(lambda _t, job_id=job.id: self._ended(job_id))
        if len(claimed) == free:
            return 0.0  # there may be more; the slots decide
        return idle_wait(now, await self._store.next_due(now), self._idle_s)

    async def _settle_and_claim(self, now: datetime, free: int) -> list[ClaimedJob]:
        finished, self._finished = self._finished, []
        ids = [job.id for job in finished]
        try:
            done, claimed = await self._store.finish_and_claim(
                self.holder, now, ids, lease=self._lease, limit=free
            )
        except Exception:
            self._finished = finished + self._finished  # settled with a later claim
            raise
        for job in finished:
            if job.id in done:
                await self._after_run(job, now)
            else:
                self._lost(job)
        return claimed

    def _ended(self, job_id: int) -> None:
        self._running.pop(job_id, None)
        self._wake.set()

    async def _execute(self, job: ClaimedJob) -> None:
        try:
            error = await self._attempt(job)
            await self._settle(job, error)
        except Exception as exc:  # a store error: the job stays running until its lease expires
            logger.opt(exception=exc).error("job {} ({}): store error: {!r}", job.id, job.kind, exc)

    async def _attempt(self, job: ClaimedJob) -> str | None:
        """Run the job's handler; None on success, else what went wrong."""
        handler = self._handlers.get(job.kind)
        if handler is None:
            return f"no handler for kind {job.kind}"
        timeout = self._timeouts.get(job.kind, self._timeout_s)
        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                await handler(job)
        except Exception as exc:
            return f"timed out after {timeout:g} s" if scope.expired() else repr(exc)
        return None

    async def _settle(self, job: ClaimedJob, error: str | None) -> None:
        """Record the attempt's outcome: done, a retry after backoff, or failed for good."""
        now = self._clock()
        if error is None:
            # Marked done with the worker's next claim, in the same transaction.
            self._finished.append(job)
            return
        if (delay := self._retry_delay(job)) is not None:
            await self._retry(job, error, delay, now)
            return
        if await self._fail(job, error, now):
            await self._after_run(job, now)
        else:
            self._lost(job)

    async def _fail(self, job: ClaimedJob, error: str, now: datetime) -> bool:
        if not await self._store.fail(job.id, self.holder, error, now):
            return False
        logger.error(
            "job {} ({}) failed for good after {} attempt(s): {}",
            job.id,
            job.kind,
            job.attempts,
            error,
        )
        return True

    def _retry_delay(self, job: ClaimedJob) -> float | None:
        if job.kind not in self._handlers:
            return None  # no later attempt would find a handler either
        return retry_delay(job.attempts, job.max_attempts, *self._backoff)

    async def _retry(self, job: ClaimedJob, error: str, delay: float, now: datetime) -> None:
        due = now + timedelta(seconds=delay)
        if not await self._store.retry(job.id, self.holder, due, error, now):
            self._lost(job)
            return
        logger.warning(
            "job {} ({}) attempt {}/{} failed: {}; retry in {:g} s",
            job.id,
            job.kind,
            job.attempts,
            job.max_attempts,
            error,
            delay,
        )

    async def _after_run(self, job: ClaimedJob, now: datetime) -> None:
        """A periodic job's run has ended: enqueue its following fire."""
        for periodic in self._periodic.values():
            fire = fire_of(periodic, job.key)
            if fire is not None:
                await schedule_after_run(self._store, periodic, fire, now)
                self.wake()
                return

    def _lost(self, job: ClaimedJob) -> None:
        logger.warning(
            "job {} ({}): its lease expired and another worker took it over; outcome dropped",
            job.id,
            job.kind,
        )
