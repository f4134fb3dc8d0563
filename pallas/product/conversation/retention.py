"""Retention: how long the timeline, the ledger, the model-call rows and the call-log files are
kept, and the hourly job that deletes what is older (docs/retention.md).

`cutoffs(policy, now)` is the decision (pure). The job asks every registered holder what it
still needs of the timeline before it deletes a message; a holder that fails keeps every
message for that run. The core holds the messages of replies still to be sent; features
register theirs where they are installed (memory: its evidence; media: what the sticker
scan has not read yet).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from loguru import logger

from pallas.config import RETENTION_DAYS
from pallas.product.conversation.jobs.periodic import PeriodicJob
from pallas.store.jobs import ClaimedJob
from pallas.store.retention import BATCH_ROWS, Budget, Holds, Pass, RetentionStore

RETENTION_KIND = "retention.prune"
RETENTION = PeriodicJob(name="retention", kind=RETENTION_KIND, every=timedelta(hours=1))
# A run stops starting batches after this long (a backlog goes over several runs); the job's
# timeout leaves room for the batch in progress and the call-log files.
RUN_BUDGET_S = 180.0
RETENTION_TIMEOUT_S = 240.0


@dataclass(frozen=True)
class RetentionPolicy:
    """Days each kind of record is kept; 0 keeps it forever."""

    messages_days: int = RETENTION_DAYS["messages"]
    events_days: int = RETENTION_DAYS["events"]
    model_calls_days: int = RETENTION_DAYS["model_calls"]
    call_log_days: int = RETENTION_DAYS["call_log"]


@dataclass(frozen=True)
class Cutoffs:
    """What is older than these goes; None: kept forever."""

    messages: datetime | None
    events: datetime | None  # ledger events, and the settled outbox rows and replies
    model_calls: datetime | None
    call_log: datetime | None


def cutoffs(policy: RetentionPolicy, now: datetime) -> Cutoffs:
    def before(days: int) -> datetime | None:
        return now - timedelta(days=days) if days > 0 else None

    return Cutoffs(
        messages=before(policy.messages_days),
        events=before(policy.events_days),
        model_calls=before(policy.model_calls_days),
        call_log=before(policy.call_log_days),
    )


@dataclass(frozen=True)
class Holder:
    """A part of the bot that still needs some messages: asked at the start of every run."""

    name: str
    holds: Callable[[], Awaitable[Holds]]


@dataclass
class RetentionHolders:
    """Who holds messages; the core registers its own, features theirs when installed."""

    _holders: list[Holder] = field(default_factory=list)

    def hold(self, name: str, holds: Callable[[], Awaitable[Holds]]) -> None:
        if any(holder.name == name for holder in self._holders):
            raise ValueError(f"retention holder {name!r} registered twice")
        self._holders.append(Holder(name, holds))

    def names(self) -> list[str]:
        return [holder.name for holder in self._holders]

    async def gather(self) -> Holds:
        """Everything held; raises if any holder fails (then no message may go)."""
        held = Holds()
        for holder in self._holders:
            held = held | await holder.holds()
        return held


@dataclass(frozen=True)
class RetentionReport:
    cutoffs: Cutoffs
    passes: tuple[Pass, ...]
    call_log_files: int
    messages_held: int  # ids and turns held (not counting `since`)

    @property
    def finished(self) -> bool:
        return all(p.done for p in self.passes)


@dataclass(frozen=True)
class RetentionDeps:
    store: RetentionStore
    holders: RetentionHolders
    policy: Callable[[], Awaitable[RetentionPolicy]]  # the console's, read at every run
    prune_call_log: Callable[[datetime], Awaitable[int]]  # files older than the cutoff
    clock: Callable[[], datetime]
    batch_rows: int = BATCH_ROWS
    pause_s: float = 0.01
    budget_s: float = RUN_BUDGET_S
    monotonic: Callable[[], float] = time.monotonic


async def run_retention(deps: RetentionDeps) -> RetentionReport:
    """One run: each table down to its cutoff in bounded batches, within the run's budget."""
    limits = cutoffs(await deps.policy(), deps.clock())
    deadline = deps.monotonic() + deps.budget_s
    budget = Budget(deps.batch_rows, deps.pause_s, lambda: deps.monotonic() >= deadline)
    passes: list[Pass] = []
    held = 0
    # The trail first: it is usually kept for less time than the lines, so by the time a
    # message goes its events are gone and no pointer is left to clear.
    if limits.events is not None:
        passes.append(await deps.store.prune_events(limits.events, budget))
        passes.append(await deps.store.prune_outbox(limits.events, budget))
    if limits.messages is not None:
        try:
            holds = await deps.holders.gather()
        except Exception:
            logger.exception("retention: a holder failed; no message is deleted this run")
        else:
            held = len(holds.message_ids) + len(holds.turn_ids)
            passes.append(await deps.store.prune_messages(limits.messages, holds, budget))
    if limits.model_calls is not None:
        passes.append(await deps.store.prune_model_calls(limits.model_calls, budget))
    files = 0
    if limits.call_log is not None:
        files = await deps.prune_call_log(limits.call_log)
    if any(p.deleted for p in passes):
        await deps.store.optimize()
    return RetentionReport(limits, tuple(passes), files, held)


async def retention_job(job: ClaimedJob, deps: RetentionDeps) -> None:
    """The periodic job: idempotent (a second run finds less or nothing to delete)."""
    report = await run_retention(deps)
    deleted = ", ".join(f"{p.table} {p.deleted}" for p in report.passes) or "nothing due"
    logger.info(
        "retention: deleted {}; {} call-log files; {}",
        deleted,
        report.call_log_files,
        "all done" if report.finished else "more next run",
    )
