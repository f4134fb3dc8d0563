"""The store as one object: the engine and the rule for writing to it.

SQLite has one writer at a time: every writer of a database holds the same lock, so they
queue here instead of sleeping in SQLite's busy-retry loop. PostgreSQL writers overlap; each
writer there keeps only its own transactions in order (its own lock).

A store is built from the engine alone and asks `Database.of(engine)` for its writes, so
every store, writer and feature on one engine shares that one rule without a lock being
handed around.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.store.engine import backend_name

# Each engine's shared lock (None: PostgreSQL). Only the lock is kept, weakly keyed by the
# engine, so a disposed engine and its pool are not held for the life of the process.
_LOCKS: weakref.WeakKeyDictionary[AsyncEngine, asyncio.Lock | None] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Writes:
    """One writer's transactions: `async with writes.begin() as conn` holds its lock."""

    engine: AsyncEngine
    lock: asyncio.Lock = field(repr=False)

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        async with self.lock, self.engine.begin() as conn:
            yield conn


@dataclass(frozen=True)
class Database:
    engine: AsyncEngine
    shared_lock: asyncio.Lock | None = field(default=None, repr=False)  # None: PostgreSQL

    @classmethod
    def of(cls, engine: AsyncEngine) -> Database:
        """This engine's Database: the same lock for every writer on it (made on first use)."""
        if engine not in _LOCKS:
            _LOCKS[engine] = asyncio.Lock() if backend_name(engine) == "sqlite" else None
        return cls(engine, _LOCKS[engine])

    @classmethod
    def use_lock(cls, engine: AsyncEngine, lock: asyncio.Lock) -> Database:
        """This engine's writers hold `lock` (a benchmark's timing lock); before any store."""
        _LOCKS[engine] = lock
        return cls(engine, lock)

    def writes(self) -> Writes:
        """A writer's transactions: the shared lock on SQLite, its own on PostgreSQL."""
        return Writes(self.engine, self.shared_lock or asyncio.Lock())

    def write(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """One transaction of a writer that keeps no order of its own (a one-off write)."""
        return self.writes().begin()
