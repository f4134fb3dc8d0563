"""This process's lease on the store it shares (docs/scaling.md).

Alone on its store (SQLite, whose file lock refuses a second process) the lease is a
formality: every claim is this process's. On PostgreSQL the process registers its name,
renews the lease every third of its length, and acts (starts a turn, sends a row) only while
its last renewal is recent enough that no other process can have taken it for dead. A renewal
that finds the lease taken over (the process was frozen past it) stops the process: what it
was doing has been finished by another.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from loguru import logger

from pallas.store.kernel_state import RECOVERY_HORIZON
from pallas.store.processes import MAX_NAME_CHARS, Owners, Processes, ProcessStore

SAFETY = 0.8  # act only within this share of the lease after a renewal (clocks drift)
WATCH_MARGIN_S = 1.0  # a renewal's own time, when watching whether a namesake is alive


class LeaseNotCurrent(RuntimeError):
    """This process's lease is not current: it consumes, queues and sends nothing."""


class NameInUse(RuntimeError):
    """Another live process runs under this process's name."""


def default_name(port: int) -> str:
    """The host and the port NapCat connects to: unique per machine, stable across
    restarts (a restarted process finds its own leftovers at once)."""
    suffix = f":{port}"
    return socket.gethostname()[: MAX_NAME_CHARS - len(suffix)] + suffix


def still_running(before: datetime, after: datetime | None) -> bool:
    """A name's row renewed while this process waited: another process holds the name."""
    return after is not None and after > before


class ProcessLease:
    def __init__(
        self,
        store: ProcessStore,
        name: str,
        lease: timedelta,
        clock: Callable[[], datetime],
        *,
        alone: bool,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.name = name
        self.run_id = uuid.uuid4().hex
        self.lease = lease
        self.alone = alone
        self._clock = clock
        self._monotonic = monotonic
        self._renewed_at: float | None = None
        self._view = Processes((), clock())
        self._accounts: Callable[[], tuple[str, ...]] = tuple
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self.on_lost: Callable[[], Awaitable[None]] | None = None
        self.lost = False  # the lease was taken over: the process stops, exit code 1
        self._halted = False
        self.on_renewed: list[Callable[[Processes], Awaitable[None]]] = []

    # -- what the rest of the process asks ------------------------------------------------

    def valid(self) -> bool:
        """Whether this process may act now (start a turn, send a row)."""
        if self.alone:
            return True
        if self._renewed_at is None:
            return False
        age = self._monotonic() - self._renewed_at
        return age < self.lease.total_seconds() * SAFETY

    async def confirm(self) -> bool:
        """Whether this process may act now. A last renewal too old (a pause, a slow store)
        is settled by renewing at once: kept, it acts; taken over, it stops."""
        if self.valid():
            return True
        if self.lost or self._halted or self._renewed_at is None:
            return False
        try:
            if await self.renew():
                return True
        except Exception as exc:
            logger.opt(exception=exc).error("process lease: renewal failed: {!r}", exc)
            return False
        await self._lost()
        return False

    def settles(self, holder: str | None) -> bool:
        """Whether what `holder` left in flight is this process's to settle: its own, one
        from before processes had names, or a dead process's that was recovered."""
        if self.alone or holder == self.name:
            return True
        if holder is None:  # from before names: the first process took and named them
            return False
        row = next((r for r in self._view.rows if r.name == holder), None)
        # A name not in the view may be a process that registered since it was read.
        return row is not None and row.recovered_at is not None

    def connected_elsewhere(self, account: str) -> bool:
        """Whether a live process (this one included) reported the account connected."""
        return account in self._view.connected_accounts()

    @property
    def view(self) -> Processes:
        return self._view

    def owners(self) -> Owners:
        """Whose leftovers start-up recovery looks at: this name's (the rows from before
        names were named by `join`), or every one when alone."""
        if self.alone:
            return Owners()
        return Owners(frozenset({self.name}))

    # -- the lease's life -----------------------------------------------------------------

    async def join(self, accounts: Callable[[], tuple[str, ...]]) -> None:
        """Take the name for this run. A row of the name that is still live is watched for
        one renewal period: a run that just died stops renewing it, a live one does not."""
        self._accounts = accounts
        if self.alone:  # nothing to share: no row, no renewals
            return
        await self._wait_out_namesake()
        await self._register()
        self._renewed_at = self._monotonic()
        now = self._clock()
        taken = await self.store.claim_unnamed(self.name, now - RECOVERY_HORIZON, now)
        if taken:
            logger.info("process {!r} took {} message(s) from before processes had names",
                        self.name, taken)  # fmt: skip
        self._view = await self.store.read(self._clock())

    async def _register(self) -> None:
        """Register, once no other process is still taking the name's last run over."""
        for waited in range(int(self.lease.total_seconds() * 10)):
            if await self.store.register(self.name, self.run_id, self._clock(), self.lease):
                return
            if waited == 0:
                logger.warning("process {!r}: another process is finishing what its last run "
                               "left; waiting for it", self.name)  # fmt: skip
            await asyncio.sleep(1.0)
        raise NameInUse(
            f"the takeover of process {self.name!r}'s last run by another process did not end; "
            "start it again once that process is done or stopped"
        )

    async def _wait_out_namesake(self) -> None:
        found = await self.store.find(self.name)
        now = self._clock()
        if found is None or not found.alive(now):
            return
        wait = self.period + WATCH_MARGIN_S
        logger.warning(
            "process name {!r} was renewed {:.0f} s ago: waiting {:.0f} s to see whether "
            "another process still holds it", self.name,
            (now - found.heartbeat_at).total_seconds(), wait,
        )  # fmt: skip
        await asyncio.sleep(wait)
        again = await self.store.find(self.name)
        if still_running(found.heartbeat_at, again.heartbeat_at if again else None):
            raise NameInUse(
                f"another Pallas process named {self.name!r} is running on this store; "
                "give each process its own PALLAS_PROCESS_NAME"
            )

    @property
    def period(self) -> float:
        """Seconds between renewals: a third of the lease, so two may fail before it ends."""
        return self.lease.total_seconds() / 3

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="process lease")

    def halt(self) -> None:
        """Stop renewing without leaving, as a killed process does (tests of a crash): it
        acts on nothing more and never renews again."""
        self._halted = True
        self._renewed_at = None
        if self._task is not None:
            self._task.cancel()

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None and not self._task.done():
            await self._task
        if self.alone or self.lost:
            return
        with contextlib.suppress(Exception):  # the store may be gone; the lease expires
            await self.store.leave(self.name, self.run_id, self._clock())

    async def _run(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.period)
            if self._stopping.is_set():
                return
            try:
                if not await self.renew():
                    await self._lost()
                    return
            except Exception as exc:  # a store hiccup: the lease runs on until it expires
                logger.opt(exception=exc).error("process lease: renewal failed: {!r}", exc)

    async def renew(self) -> bool:
        started = self._monotonic()
        now = self._clock()
        kept = await self.store.renew(self.name, self.run_id, now, self.lease, self._accounts())
        if not kept:
            return False
        self._renewed_at = started  # counted from before the write: the conservative end
        self._view = await self.store.read(now)
        for listener in self.on_renewed:
            try:
                await listener(self._view)
            except Exception as exc:
                logger.opt(exception=exc).error("process lease: after renewal: {!r}", exc)
        return True

    async def refresh(self) -> None:
        """Read the process table again (after a takeover changed it)."""
        self._view = await self.store.read(self._clock())

    async def _lost(self) -> None:
        if self.lost:
            return  # said and acted on once
        self._renewed_at = None
        self.lost = True
        logger.critical(
            "process {!r}: its lease was taken over (it was stopped or cut off for longer "
            "than {:.0f} s); another process finished its work. Stopping.",
            self.name, self.lease.total_seconds(),
        )  # fmt: skip
        if self.on_lost is not None:
            await self.on_lost()
