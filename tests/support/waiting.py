"""Waiting for in-process state in tests: poll a predicate, fail plainly on timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


async def until(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def until_async(predicate: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    """`until` for a predicate that must read the store."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await predicate():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)
