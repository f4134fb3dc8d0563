"""Group commit: many concurrent writers share one transaction.

Each caller awaits its own result, which is only set once the shared transaction has
committed. A batch that fails is retried one item at a time, so one bad item cannot take
its neighbours down with it. A patient item may wait up to `patience_s` for company before
its transaction starts; anything else queued behind it ends the wait at once, and items
always commit in the order they were queued.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from loguru import logger

from pallas.store.database import Writes

T = TypeVar("T")
R = TypeVar("R")

ApplyBatch = Callable[[Sequence[T]], Awaitable[list[R]]]


class WriterClosedError(RuntimeError):
    """The writer is stopping or not started; nothing more is accepted."""


@dataclass
class _Pending(Generic[T, R]):
    item: T
    future: asyncio.Future[R]
    patient: bool = False


class GroupCommitter(Generic[T, R]):
    """Runs `apply` (one transaction per call) over batches of queued items."""

    def __init__(
        self,
        name: str,
        apply: ApplyBatch[T, R],
        *,
        max_batch: int = 500,
        patience_s: float = 0.0,
        writes: Writes,
    ) -> None:
        self._name = name
        self._apply = apply
        self._max_batch = max_batch
        self._patience_s = patience_s
        self._impatient = asyncio.Event()  # set when an item that may not wait is queued
        # The database's rule for writers (pallas/store/database.py): on SQLite one lock
        # shared by every writer, so they queue here instead of in SQLite's busy-retry loop.
        self._writes = writes
        self._queue: asyncio.Queue[_Pending[T, R] | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self._name)

    async def close(self) -> None:
        """Commit everything already accepted, then stop."""
        if self._task is None or self._closed:
            return
        self._closed = True
        self._queue.put_nowait(None)
        self._impatient.set()
        await self._task

    async def submit(self, item: T) -> R:
        return await self.enqueue(item)

    def enqueue(self, item: T, *, patient: bool = False) -> asyncio.Future[R]:
        """Queue the item; its future is settled once its transaction has committed."""
        if self._closed or self._task is None:
            raise WriterClosedError(f"{self._name} is not running")
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Pending(item, future, patient))
        if not patient:
            self._impatient.set()
        return future

    def hurry(self) -> None:
        """Patient items queued now need not wait for company (someone waits for them)."""
        self._impatient.set()

    async def _run(self) -> None:
        while True:
            first = await self._queue.get()
            if first is None:
                return
            if first.patient and self._patience_s > 0:
                await self._wait_for_company()
            self._impatient.clear()  # whatever set it is in this batch ...
            batch, stop = self._drain(first)
            if not self._queue.empty():
                self._impatient.set()  # ... or a full batch is waiting: no need to wait
            await self._commit(batch)
            if stop:
                return

    async def _wait_for_company(self) -> None:
        if self._impatient.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._impatient.wait(), self._patience_s)

    def _drain(self, first: _Pending[T, R]) -> tuple[list[_Pending[T, R]], bool]:
        batch = [first]
        while len(batch) < self._max_batch and not self._queue.empty():
            nxt = self._queue.get_nowait()
            if nxt is None:
                return batch, True
            batch.append(nxt)
        return batch, False

    async def _commit(self, batch: list[_Pending[T, R]]) -> None:
        try:
            async with self._writes.lock:  # `apply` opens its own transaction
                outcomes = await self._apply([p.item for p in batch])
        except Exception as exc:
            if len(batch) == 1:
                logger.opt(exception=exc).error("{} write failed: {!r}", self._name, exc)
                _settle(batch[0].future, exc)
                return
            logger.warning(
                "{}: batch of {} failed ({!r}); retrying one by one", self._name, len(batch), exc
            )
            for pending in batch:
                await self._commit([pending])
            return
        for pending, outcome in zip(batch, outcomes, strict=True):
            _settle(pending.future, outcome)


def _settle(future: asyncio.Future[R], result: R | BaseException) -> None:
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)
