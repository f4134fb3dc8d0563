"""Periodic jobs: declared in code, each run an ordinary job keyed by its fire time.

At most one run of a periodic job is open (pending or running) at a time: the next one is
enqueued when a run ends, and `ensure_scheduled` fills the gap at start-up. The key
`periodic:<name>:<fire time>` makes a second copy of a fire impossible, whoever enqueues it.
A fire missed while the bot was down is still pending and runs once at start; the next fire
is computed from then, so downtime never causes a burst of runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.triggers.cron import CronTrigger

from pallas.store.jobs import JobRef, JobStore

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
KEY_PREFIX = "periodic:"
MAX_NAME_CHARS = 64
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class PeriodicJob:
    """Run `kind` with `payload` every `every` (aligned to the Unix epoch) or on a
    five-field `cron` expression in UTC; exactly one of the two."""

    name: str
    kind: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    every: timedelta | None = None
    cron: str | None = None
    _trigger: CronTrigger | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name or len(self.name) > MAX_NAME_CHARS or ":" in self.name:
            raise ValueError(
                f"periodic job name must be 1-{MAX_NAME_CHARS} characters without ':', "
                f"got {self.name!r}"
            )
        if (self.every is None) == (self.cron is None):
            raise ValueError(f"periodic job {self.name!r}: give exactly one of every and cron")
        if self.every is not None and self.every <= timedelta(0):
            raise ValueError(f"periodic job {self.name!r}: every must be positive")
        if self.cron is not None:
            object.__setattr__(self, "_trigger", _parse_cron(self.name, self.cron))


def _parse_cron(name: str, expr: str) -> CronTrigger:
    try:
        trigger = CronTrigger.from_crontab(expr, timezone=UTC)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"periodic job {name!r}: bad cron expression {expr!r}: {exc}") from exc
    if trigger.get_next_fire_time(None, EPOCH) is None:
        raise ValueError(f"periodic job {name!r}: cron expression {expr!r} never fires")
    return trigger


def next_fire(job: PeriodicJob, after: datetime) -> datetime:
    """The job's first fire time strictly after `after`.

    `every` fires at whole multiples of it since the Unix epoch, so every process (and every
    restart) computes the same fire times, hence the same keys."""
    if job.every is not None:
        return EPOCH + ((after - EPOCH) // job.every + 1) * job.every
    assert job._trigger is not None  # set by __post_init__ whenever cron is
    fire = job._trigger.get_next_fire_time(None, after + _TICK)
    if fire is None:
        raise ValueError(f"periodic job {job.name!r}: cron {job.cron!r} never fires after {after}")
    return fire.astimezone(UTC)


def key_prefix(job: PeriodicJob) -> str:
    return f"{KEY_PREFIX}{job.name}:"


def periodic_key(job: PeriodicJob, fire: datetime) -> str:
    return f"{key_prefix(job)}{fire.astimezone(UTC).isoformat()}"


def fire_of(job: PeriodicJob, key: str | None) -> datetime | None:
    """The fire time a job key stands for, if it is a run of this periodic job."""
    if key is None or not key.startswith(key_prefix(job)):
        return None
    try:
        return datetime.fromisoformat(key.removeprefix(key_prefix(job)))
    except ValueError:
        return None


async def ensure_scheduled(
    store: JobStore, jobs: Sequence[PeriodicJob], now: datetime
) -> list[JobRef]:
    """Give every periodic job with no open run its next fire; the runs created."""
    created = []
    for job in jobs:
        if await store.open_with_key_prefix(key_prefix(job)):
            continue
        created.append(await enqueue_fire(store, job, next_fire(job, now), now))
    return [ref for ref in created if ref.created]


async def schedule_after_run(
    store: JobStore, job: PeriodicJob, fire: datetime, now: datetime
) -> JobRef:
    """After the run for `fire` ended (done or failed): the following fire. From `now` when
    the run was late (a fire missed while down), so missed fires are not replayed."""
    return await enqueue_fire(store, job, next_fire(job, max(now, fire)), now)


async def enqueue_fire(store: JobStore, job: PeriodicJob, fire: datetime, now: datetime) -> JobRef:
    return await store.enqueue(job.kind, job.payload, now, due_at=fire, key=periodic_key(job, fire))
