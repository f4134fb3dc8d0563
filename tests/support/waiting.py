"""Waiting for in-process state in tests: poll a predicate, fail plainly on timeout.

The bound is generous: a wait returns as soon as its condition holds, and only a condition
that never comes waits it out, so it need not be tight, even on a machine busy with the
rest of the suite (two processes, bots and database servers of their own).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

TIMEOUT_S = 30.0


async def until(predicate: Callable[[], object], timeout: float = TIMEOUT_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def until_async(predicate: Callable[[], Awaitable[bool]], timeout: float = TIMEOUT_S) -> None:
    """`until` for a predicate that must read the store."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await predicate():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)
