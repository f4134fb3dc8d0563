"""Taking over what a dead process left (docs/scaling.md).

After each renewal of its own lease a process looks for processes whose lease expired and
that nobody recovered. It claims one (the store lets one claimer win), runs the start-up
recovery on that process's leftovers (its unfinished turns, the messages it stored and had not
turned yet, the retries owed), takes its recent messages as its own, and marks it recovered:
from then on its chats' turns pass on, and its outbox rows left `sending` are settled under
the crash rules by any process holding the account's connection. A takeover that failed is
tried again after the taker's next renewal; one whose taker died passes on once the taker
itself was taken over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime

from loguru import logger

from pallas.product.conversation.processes.lease import ProcessLease
from pallas.product.conversation.turns.buffers import ChatLease
from pallas.product.conversation.turns.recovery import RecoveryReport
from pallas.store.kernel_state import RECOVERY_HORIZON
from pallas.store.processes import ChatTurns, Owners, Processes

Recover = Callable[[Owners], Awaitable[RecoveryReport]]
ReleaseJobs = Callable[[str], Awaitable[int]]  # a dead process's name -> jobs released


def to_take_over(view: Processes, me: str) -> list[tuple[str, str | None]]:
    """(process, who had taken its recovery) for processes whose lease expired and whose
    recovery nobody took, or this process took and did not finish (it failed, or stopped in
    the middle), or a process took and then died, and was itself recovered since."""
    return [
        (row.name, row.recovered_by) for row in view.rows
        if row.name != me and row.recovered_at is None and row.expires_at <= view.now
        and row.recovered_by in (None, me, *_recovered(view))
    ]  # fmt: skip


def _recovered(view: Processes) -> tuple[str, ...]:
    return tuple(row.name for row in view.rows if row.recovered_at is not None)


class Takeover:
    def __init__(
        self,
        lease: ProcessLease,
        recover: Recover,
        release_jobs: ReleaseJobs,
        clock: Callable[[], datetime],
    ) -> None:
        self._lease = lease
        self._recover = recover
        self._release_jobs = release_jobs
        self._clock = clock
        self._running: asyncio.Task[None] | None = None

    async def after_renewal(self, view: Processes) -> None:
        """Start taking over the dead, beside the renewals: a long recovery must not hold
        this process's own renewals back until its lease expires too."""
        if self._running is not None and not self._running.done():
            return  # the next renewal looks again
        dead = to_take_over(view, self._lease.name)
        if dead:
            task = asyncio.create_task(self._take_over_all(dead), name="takeover")
            task.add_done_callback(_log_failure)
            self._running = task

    async def wait(self) -> None:
        """Until a takeover under way has ended (tests, shutdown)."""
        if self._running is not None:
            await asyncio.gather(self._running, return_exceptions=True)

    async def _take_over_all(self, dead: list[tuple[str, str | None]]) -> None:
        store, me = self._lease.store, self._lease.name
        for name, taken_by in dead:
            if not await self._lease.confirm():
                return
            mine = taken_by == me
            if mine or await store.claim_recovery(name, me, self._clock(), from_=taken_by):
                await self._take_over(name)

    async def _take_over(self, dead: str) -> None:
        store, me = self._lease.store, self._lease.name
        report = await self._recover(Owners(frozenset({dead})))
        jobs = await self._release_jobs(dead)  # claimed at once, not after their own lease
        if not await self._lease.confirm():  # paused meanwhile: maybe no longer this one's
            return
        now = self._clock()
        adopted = await store.adopt_messages(dead, me, now - RECOVERY_HORIZON)
        await store.recovered(dead, me, now)
        await self._lease.refresh()
        logger.warning(
            "process {!r} stopped renewing its lease; {!r} took over its work: {}, {} "
            "message(s) adopted, {} job(s) released", dead, me, report, adopted, jobs,
        )  # fmt: skip


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.opt(exception=task.exception()).error(
            "takeover failed; it is tried again after the next renewal"
        )


class SharedChats(ChatLease):
    """A chat's turn across processes: the `chat_turn` row, taken only while this process's
    lease is current."""

    def __init__(self, turns: ChatTurns, lease: ProcessLease, clock: Callable[[], datetime]):
        self._turns = turns
        self._lease = lease
        self._clock = clock
        self._unreleased: set[int] = set()  # a release the store missed: tried again
        self._held: set[int] = set()  # chats whose turn runs here now

    async def take(self, stream_id: int) -> bool:
        if not await self._lease.confirm():
            return False
        taken = await self._turns.take(stream_id, self._clock())
        if taken:
            self._unreleased.discard(stream_id)
            self._held.add(stream_id)
        return taken

    async def release(self, stream_id: int) -> None:
        self._held.discard(stream_id)
        try:
            await self._turns.release(stream_id)
        except Exception:
            self._unreleased.add(stream_id)  # held until released: others' turns wait
            raise

    async def retry_releases(self, _view: Processes) -> None:
        """After each renewal: give back the chats whose release the store missed."""
        for stream_id in sorted(self._unreleased - self._held):
            if stream_id in self._held:  # taken again while an earlier release ran
                continue
            await self._turns.release(stream_id)
            self._unreleased.discard(stream_id)
