"""Taking over what a dead process left (docs/scaling.md).

After each renewal of its own lease a process looks for processes whose lease expired and
that nobody recovered. It claims one (the store lets one claimer win), runs the start-up
recovery on that process's leftovers (its unfinished turns, the messages it stored and had not
turned yet, the retries owed), takes its recent messages as its own, and marks it recovered:
from then on its chats' turns pass on, and its outbox rows left `sending` are settled under
the crash rules by any process holding the account's connection. A process that stops in the
middle of a takeover finishes it at its next start.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

from loguru import logger

from pallas.product.conversation.processes.lease import ProcessLease
from pallas.product.conversation.turns.buffers import ChatLease
from pallas.product.conversation.turns.recovery import RECOVERY_HORIZON, RecoveryReport
from pallas.store.processes import ChatTurns, Owners, Processes

Recover = Callable[[Owners], Awaitable[RecoveryReport]]
ReleaseJobs = Callable[[str], Awaitable[int]]  # a dead process's name -> jobs released


def dead_and_unclaimed(view: Processes, me: str) -> list[str]:
    """Processes whose lease expired and whose recovery nobody took."""
    return [
        row.name for row in view.rows
        if row.name != me and row.recovered_by is None and row.expires_at <= view.now
    ]  # fmt: skip


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

    async def after_renewal(self, view: Processes) -> None:
        store, me = self._lease.store, self._lease.name
        for name in dead_and_unclaimed(view, me):
            if await store.claim_recovery(name, me, self._clock()):
                await self._take_over(name)

    async def resume(self) -> None:
        """Takeovers this process's name began in an earlier run and did not finish."""
        for name in await self._lease.store.recoveries_of(self._lease.name):
            await self._take_over(name)

    async def _take_over(self, dead: str) -> None:
        store, me = self._lease.store, self._lease.name
        report = await self._recover(Owners(frozenset({dead})))
        jobs = await self._release_jobs(dead)  # claimed at once, not after their own lease
        now = self._clock()
        adopted = await store.adopt_messages(dead, me, now - RECOVERY_HORIZON)
        await store.recovered(dead, me, now)
        await self._lease.refresh()
        logger.warning(
            "process {!r} stopped renewing its lease; {!r} took over its work: {}, {} "
            "message(s) adopted, {} job(s) released", dead, me, report, adopted, jobs,
        )  # fmt: skip


class SharedChats(ChatLease):
    """A chat's turn across processes: the `chat_turn` row, taken only while this process's
    lease is current."""

    def __init__(self, turns: ChatTurns, lease: ProcessLease, clock: Callable[[], datetime]):
        self._turns = turns
        self._lease = lease
        self._clock = clock

    async def take(self, stream_id: int) -> bool:
        if not self._lease.valid():
            return False
        return await self._turns.take(stream_id, self._clock())

    async def release(self, stream_id: int) -> None:
        await self._turns.release(stream_id)
