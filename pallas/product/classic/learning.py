"""Learning off the message's path: pairs seen are gathered and written together about once a
second (one transaction for many), and the contexts the store knows are kept as a set so a
line nobody ever answered costs no query.

Both are caches over the store, never the truth: a crash loses at most the last second's
sightings (learning, not a message: the timeline has every line), and the set of contexts is
read back from the store at start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from loguru import logger

from pallas.product.classic.store import LearnedStore, Said

FLUSH_EVERY_S = 1.0  # sightings are written this often
# A context's candidates are asked of the store again after this long: a pair is usable
# within FLUSH_EVERY_S + FRESH_S of its answer being said (docs/classic.md says 10 s at most).
FRESH_S = 3.0
MAX_WAITING = 5_000  # sightings held at most; past it the oldest are dropped, and said so


@dataclass(frozen=True)
class Sighting:
    stream_id: int
    context: Said
    answer: Said
    segments: list[dict[str, Any]]
    person_id: int
    at: datetime
    lines: tuple[int, int] = (0, 0)  # the context's and the answer's timeline rows
    context_person: int = 0  # who said the context (an opted-out member teaches nothing)


class Learning:
    """The sightings waiting to be written, and the contexts known to have answers."""

    def __init__(self, store: LearnedStore, every_s: float = FLUSH_EVERY_S) -> None:
        self._store = store
        self._every_s = every_s
        self._waiting: list[Sighting] = []
        self._known: set[str] | None = None  # None until read from the store
        self._task: asyncio.Task[None] | None = None
        # Bumped when what the store answers changed at once (a ban, a pair forgotten, a ban
        # lifted): the stage's cached candidates are good for one generation, and at most
        # FRESH_S seconds for what learning adds.
        self.generation = 0

    def saw(self, sighting: Sighting) -> None:
        if len(self._waiting) >= MAX_WAITING:
            logger.warning("learned lines: {} sightings waiting; the oldest dropped", MAX_WAITING)
            del self._waiting[0]
        self._waiting.append(sighting)

    def may_answer(self, context_hash: str) -> bool:
        """False only when the store surely has no answer for it (a cache: unsure is True)."""
        return self._known is None or context_hash in self._known

    async def start(self) -> None:
        self._known = None
        self._task = asyncio.create_task(self._run(), name="learned lines")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.flush()

    def changed(self) -> None:
        """What the store answers changed (a ban, a pair forgotten)."""
        self.generation += 1

    async def flush(self) -> None:
        batch, self._waiting = self._waiting, []
        if not batch:
            return
        # One person giving one answer to one context twice in a second counts once anyway.
        once = {(s.stream_id, s.context.hash, s.answer.hash, s.person_id): s for s in batch}
        try:
            await self._store.learn_many(list(once.values()))
        except Exception as exc:  # a store hiccup: these sightings are lost, learning goes on
            logger.opt(exception=exc).error("learned lines: {} sightings not kept", len(batch))
            return
        if self._known is not None:
            self._known.update(s.context.hash for s in batch)

    async def _run(self) -> None:
        try:
            self._known = await self._store.context_hashes()
        except Exception as exc:  # without the set every line is looked up: slower, correct
            logger.opt(exception=exc).error("learned lines: contexts not read: {!r}", exc)
        while True:
            await asyncio.sleep(self._every_s)
            await self.flush()
