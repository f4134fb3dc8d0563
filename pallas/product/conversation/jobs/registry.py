"""`Jobs`: where features plug into the durable jobs (docs/jobs.md).

A feature registers a handler for its job kind, declares its periodic jobs, and enqueues work
(an after-turn observer, say). The worker is built at start-up from what was registered, after
the leases of the previous run are released: one bot process uses one database, so whatever
was `running` at start-up was cut off by a crash and is taken again at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from loguru import logger

from pallas.product.conversation.jobs.periodic import PeriodicJob
from pallas.product.conversation.jobs.worker import IDLE_LOOK_S, JobHandler, JobWorker
from pallas.store.jobs import MAX_HOLDER_CHARS, ClaimedJob, JobRef, JobStore

PURGE_KIND = "jobs.purge"
KEEP_FINISHED = timedelta(days=7)
# Every night at 04:17 UTC: finished jobs older than a week are deleted.
PURGE = PeriodicJob(name="purge_finished_jobs", kind=PURGE_KIND, cron="17 4 * * *")


def holder_prefix(process: str) -> str:
    """What every job lease of the process's runs starts with."""
    return process[: MAX_HOLDER_CHARS - 9] + "|"


class Jobs:
    def __init__(
        self, store: JobStore, clock: Callable[[], datetime], *, idle_s: float = IDLE_LOOK_S
    ) -> None:
        self.store = store
        self._clock = clock
        # The longest the worker sleeps with nothing due (an enqueue wakes it sooner); a test
        # that moves its clock by hand asks it to look often.
        self._idle_s = idle_s
        self._handlers: dict[str, JobHandler] = {PURGE_KIND: self._purge}
        self._timeouts: dict[str, float] = {}
        self._periodic: dict[str, PeriodicJob] = {PURGE.name: PURGE}
        self._worker: JobWorker | None = None
        # On a shared store: the process's name, which its job leases start with, so that
        # its next run or a takeover can release them (docs/scaling.md).
        self.process: str | None = None

    def handle(self, kind: str, handler: JobHandler, *, timeout_s: float | None = None) -> None:
        """Run `handler` for jobs of `kind` (before start-up; a kind has one handler)."""
        if kind in self._handlers:
            raise ValueError(f"job kind {kind!r} already has a handler")
        self._handlers[kind] = handler
        if timeout_s is not None:
            self._timeouts[kind] = timeout_s

    def handles(self, kind: str) -> bool:
        """Whether a handler runs jobs of `kind` (a feature asks what another plugged)."""
        return kind in self._handlers

    def every(self, job: PeriodicJob) -> None:
        """Declare a periodic job (re-created at each start-up; never doubled)."""
        if job.name in self._periodic:
            raise ValueError(f"periodic job {job.name!r} is declared twice")
        self._periodic[job.name] = job

    async def enqueue(
        self,
        kind: str,
        payload: Mapping[str, Any],
        *,
        key: str | None = None,
        due_at: datetime | None = None,
        max_attempts: int = 5,
    ) -> JobRef:
        """Commit a job (refused for a kind nobody handles); the worker looks at once."""
        if kind not in self._handlers:
            raise ValueError(f"no handler for job kind {kind!r}")
        ref = await self.store.enqueue(
            kind, payload, self._clock(), due_at=due_at, key=key, max_attempts=max_attempts
        )
        if self._worker is not None:
            self._worker.wake()
        return ref

    async def enqueue_many(self, kind: str, items: Sequence[tuple[Mapping[str, Any], str]]) -> None:
        """Commit several keyed jobs of one kind in one transaction (due now)."""
        if kind not in self._handlers:
            raise ValueError(f"no handler for job kind {kind!r}")
        await self.store.enqueue_many(kind, items, self._clock())
        if self._worker is not None:
            self._worker.wake()

    async def start(self) -> None:
        # Alone on the store, every running job is the previous run's: taken again at once.
        # Sharing it (PostgreSQL), a running job may be another live process's: taken only
        # once its lease has expired, like any claim.
        own = holder_prefix(self.process) if self.process else None
        if self.store.alone or own is not None:
            held_by = None if self.store.alone else own
            released = await self.store.release_running(self._clock(), held_by)
            if released:
                logger.warning("jobs: {} job(s) cut off by the last stop run again", released)
        self._worker = JobWorker(
            self.store,
            self._handlers,
            self._clock,
            holder=f"{own}{uuid.uuid4().hex[:8]}" if own else None,
            timeouts=self._timeouts,
            periodic=list(self._periodic.values()),
            idle_s=self._idle_s,
        )
        await self._worker.start()

    async def stop(self) -> None:
        if self._worker is not None:
            await self._worker.stop()

    async def _purge(self, job: ClaimedJob) -> None:
        deleted = await self.store.purge_finished(self._clock() - KEEP_FINISHED)
        if deleted:
            logger.info("jobs: {} finished job(s) older than {} deleted", deleted, KEEP_FINISHED)
