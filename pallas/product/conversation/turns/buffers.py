"""Per-stream turn buffers: one turn at a time per stream, streams in parallel.

A tick runs when a message arrives (and on a 0.1 s heartbeat). For each idle stream it takes
the head run of messages from one sender as a batch, claims the stream and starts the turn
as its own task; the tick never waits for a turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from loguru import logger

from pallas.product.conversation.processes.lease import LeaseNotCurrent
from pallas.product.conversation.turns.turn import Admitted, TurnDecision
from pallas.store.audit import EventKind
from pallas.store.ledger import LedgerEvent, LedgerWriter

# Nothing waiting on time: the loop sleeps until a submit or a release wakes it; this slow
# look is a safety net.
IDLE_LOOK_S = 30.0
BUFFER_CAP = 200
PRIVATE_WAIT_S = 10.0


class TurnSource(StrEnum):
    REPLY = "reply"  # driven by incoming messages
    PROACTIVE = "proactive"  # the bot's own initiative (reminders, warm-ups)


@dataclass(frozen=True)
class Batch:
    stream_id: int
    items: tuple[Admitted, ...]
    may_wait: bool
    private: bool = False


RunTurn = Callable[[Batch], Awaitable[TurnDecision]]
BLOCKED_RETRY_S = 0.5  # a chat whose turn another process runs: look again this soon


class ChatLease(Protocol):
    """One turn at a time per chat across the processes sharing the store (docs/scaling.md);
    within a process the buffers' own claims keep it."""

    async def take(self, stream_id: int) -> bool: ...

    async def release(self, stream_id: int) -> None: ...


class OnlyProcess:
    """Alone on the store: the in-process claim is the whole story."""

    async def take(self, stream_id: int) -> bool:
        return True

    async def release(self, stream_id: int) -> None:
        return None


@dataclass
class _Stream:
    private: bool
    items: deque[Admitted] = field(default_factory=deque)
    waited: bool = False  # the head batch already waited once
    held_at: float | None = None  # monotonic time the head batch started waiting
    watermark: int = 0  # newest message id when the head batch started waiting
    blocked_until: float = 0.0  # monotonic: another process runs the chat's turn


def head_run(items: deque[Admitted]) -> tuple[Admitted, ...]:
    """The buffer's head run of messages from one sender."""
    sender = items[0].sender_person_id
    run = []
    for item in items:
        if item.sender_person_id != sender:
            break
        run.append(item)
    return tuple(run)


class TurnBuffers:
    def __init__(
        self,
        run_turn: RunTurn,
        ledger: LedgerWriter,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        buffer_cap: int = BUFFER_CAP,
        private_wait_s: float = PRIVATE_WAIT_S,
        chats: ChatLease | None = None,
    ) -> None:
        self._run_turn = run_turn
        self.chats: ChatLease = chats or OnlyProcess()
        self._ledger = ledger
        self._monotonic = monotonic
        self._cap = buffer_cap
        self._private_wait_s = private_wait_s
        self._streams: dict[int, _Stream] = {}
        self._claims: dict[int, TurnSource] = {}
        self._turns: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._stopping = False

    # -- intake ---------------------------------------------------------------------------

    def submit(self, item: Admitted, *, private: bool) -> None:
        stream = self._streams.setdefault(item.stored.stream_id, _Stream(private=private))
        stream.items.append(item)
        if len(stream.items) > self._cap:
            self._overflow(item.stored.stream_id, stream)
        self._wake.set()

    def _overflow(self, stream_id: int, stream: _Stream) -> None:
        # Oldest first: they stay in the timeline as history, and the ledger says so.
        dropped = [stream.items.popleft() for _ in range(len(stream.items) - self._cap)]
        logger.warning(
            "stream {}: buffer full, {} oldest message(s) left unanswered", stream_id, len(dropped)
        )
        self._ledger.record(
            *(
                LedgerEvent(
                    EventKind.GATE_DROPPED,
                    stream_id,
                    reason="buffer_overflow",
                    person_id=d.sender_person_id,
                    message_id=d.message_id,
                    payload={"stage": "buffer"},
                )
                for d in dropped
            )
        )

    # -- claims ---------------------------------------------------------------------------

    def try_claim(self, stream_id: int, source: TurnSource) -> bool:
        holder = self._claims.get(stream_id)
        if holder is None:
            self._claims[stream_id] = source
            return True
        if holder is not source:  # same-source retries are routine; only collisions count
            self._ledger.record(
                LedgerEvent(
                    EventKind.TURN_COMPETITION, stream_id, reason=f"{source}_blocked_by_{holder}"
                )
            )
        return False

    def release(self, stream_id: int) -> None:
        self._claims.pop(stream_id, None)
        self._wake.set()

    # -- the loop -------------------------------------------------------------------------

    def start(self) -> None:
        self._loop_task = asyncio.create_task(self._loop(), name="turn buffers")

    async def stop(self, grace_s: float = 10.0) -> None:
        # A flag, not task cancellation: on Python 3.11 `wait_for` can swallow a cancel that
        # lands as its inner wait completes, and the loop would never end.
        self._stopping = True
        self._wake.set()
        if self._loop_task is not None:
            await self._loop_task
        if self._turns:
            _, pending = await asyncio.wait(self._turns, timeout=grace_s)
            for task in pending:
                task.cancel()

    async def _loop(self) -> None:
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._next_look())
            self._wake.clear()
            if not self._stopping:
                self.tick()

    def _next_look(self) -> float:
        """Seconds until a held private batch may run again without more arriving; the
        rest is woken (a submit, a release)."""
        now = self._monotonic()
        due = [
            stream.held_at + self._private_wait_s - now
            for stream_id, stream in self._streams.items()
            if stream.private and stream.held_at is not None and stream.items
            and stream_id not in self._claims  # a running turn's release wakes the loop
        ]  # fmt: skip
        blocked = [s.blocked_until - now for s in self._streams.values() if s.blocked_until > now]
        return max(0.0, min(due + blocked, default=IDLE_LOOK_S))

    def tick(self) -> None:
        for stream_id in list(self._streams):
            stream = self._streams[stream_id]
            if not stream.items:
                del self._streams[stream_id]
            elif stream_id not in self._claims and self._ready(stream):
                self._start(stream_id, stream)

    def _ready(self, stream: _Stream) -> bool:
        if stream.blocked_until > self._monotonic():
            return False
        if stream.held_at is None:
            return True
        if any(item.message_id > stream.watermark for item in stream.items):
            return True  # more arrived while the batch waited
        waited = self._monotonic() - stream.held_at
        return stream.private and waited >= self._private_wait_s

    def _start(self, stream_id: int, stream: _Stream) -> None:
        if not self.try_claim(stream_id, TurnSource.REPLY):
            return
        try:
            batch = self._take(stream_id, stream)
        except Exception as exc:  # nothing was removed: the head stays for the next tick
            logger.opt(exception=exc).error("stream {}: could not take a batch", stream_id)
            self.release(stream_id)
            return
        task = asyncio.create_task(self._turn(stream_id, batch), name=f"turn-{stream_id}")
        self._turns.add(task)
        task.add_done_callback(self._turns.discard)

    def _take(self, stream_id: int, stream: _Stream) -> Batch:
        items = head_run(stream.items)
        may_wait = not stream.waited
        for _ in items:
            stream.items.popleft()
        stream.held_at, stream.waited = None, False
        return Batch(stream_id, items, may_wait, stream.private)

    async def _turn(self, stream_id: int, batch: Batch) -> None:
        try:
            if not await self.take_chat(stream_id):
                self._put_back(stream_id, batch)
                return
            try:
                decision = await self._run_turn(batch)
            finally:
                await self.release_chat(stream_id)
            if decision is TurnDecision.WAIT:
                self._hold(stream_id, batch)
        except LeaseNotCurrent:  # nothing consumed: the batch waits for a current lease
            self._put_back(stream_id, batch)
        except Exception as exc:
            logger.opt(exception=exc).error("stream {}: turn failed", stream_id)
            self._ledger.record(
                LedgerEvent(
                    EventKind.TURN_FAILED,
                    stream_id,
                    reason=type(exc).__name__,
                    payload={"error": repr(exc)[:500]},
                )
            )
        finally:
            self.release(stream_id)

    async def take_chat(self, stream_id: int) -> bool:
        """The chat's turn across processes (after the in-process claim); False: not now."""
        try:
            return await self.chats.take(stream_id)
        except Exception as exc:  # the store is away: the batch waits, nothing is lost
            logger.opt(exception=exc).error("stream {}: could not take its turn", stream_id)
            return False

    async def release_chat(self, stream_id: int) -> None:
        try:
            await self.chats.release(stream_id)
        except Exception as exc:  # the row stays this process's; its next turn takes it again
            logger.opt(exception=exc).error("stream {}: could not release its turn", stream_id)

    def _put_back(self, stream_id: int, batch: Batch) -> None:
        """Another process runs the chat's turn now: the batch goes back as it was taken,
        to be tried again shortly."""
        stream = self._streams.setdefault(stream_id, _Stream(private=batch.private))
        stream.items.extendleft(reversed(batch.items))
        stream.waited = not batch.may_wait
        stream.blocked_until = self._monotonic() + BLOCKED_RETRY_S

    def _hold(self, stream_id: int, batch: Batch) -> None:
        """Put the batch back at the head; it runs again when more arrives (private: 10 s)."""
        stream = self._streams.setdefault(stream_id, _Stream(private=batch.private))
        stream.items.extendleft(reversed(batch.items))
        stream.waited = True
        stream.held_at = self._monotonic()
        # Anything newer than the batch itself (even if it arrived while deciding) ends the wait.
        stream.watermark = max(item.message_id for item in batch.items)

    # -- introspection for the console and tests ------------------------------------------

    def buffered(self, stream_id: int) -> int:
        stream = self._streams.get(stream_id)
        return len(stream.items) if stream else 0

    @property
    def running(self) -> frozenset[int]:
        return frozenset(self._claims)
