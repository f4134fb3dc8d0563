"""Decay: memories weaken with time unless they are said again, and the weak ones fade.

An entry's strength is its confidence halved every half-life of its kind since it was last
seen (stored or said again). Once a night, entries weaker than FADE_BELOW fade: no longer
recalled, kept for the audit, restorable by the owner. With the default confidence (0.6) a
fact nobody repeats fades after about a year, a taught behaviour after half a year, an
episode after six weeks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from loguru import logger

from pallas.product.conversation.jobs.periodic import PeriodicJob
from pallas.product.memory.store import MemoryKind, MemoryRecord, MemoryStatus, MemoryStore
from pallas.store.jobs import ClaimedJob

DECAY_KIND = "memory.decay"
DECAY = PeriodicJob(name="memory_decay", kind=DECAY_KIND, cron="41 4 * * *")
HALF_LIFE = {
    MemoryKind.FACT: timedelta(days=180),
    MemoryKind.BEHAVIOR: timedelta(days=90),
    MemoryKind.EPISODE: timedelta(days=21),
}
FADE_BELOW = 0.15
PAGE = 1000


def strength(record: MemoryRecord, now: datetime) -> float:
    age = max(timedelta(0), now - record.last_seen_at)
    return record.confidence * 0.5 ** (age / HALF_LIFE[record.kind])


def to_fade(records: Iterable[MemoryRecord], now: datetime) -> list[int]:
    return [r.id for r in records if strength(r, now) < FADE_BELOW]


async def run_decay(job: ClaimedJob, store: MemoryStore, clock: Callable[[], datetime]) -> None:
    now = clock()
    faded = 0
    # A heard group entry nobody confirms weakens like any other and fades the same way.
    for status in (MemoryStatus.ACTIVE, MemoryStatus.HEARD):
        below = None
        while page := await store.entries(status=status, limit=PAGE, below_id=below):
            faded += await store.fade(to_fade(page, now), now)
            below = page[-1].id
    if faded:
        logger.info("memory: {} entries faded (not said again for too long)", faded)
