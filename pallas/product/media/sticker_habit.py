"""The sticker-habit scan: every 30 minutes, the stickers sent since the last scan are counted
per group, person and sticker (deterministic: no model on this path; docs/media.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from loguru import logger

from pallas.product.conversation.jobs.periodic import PeriodicJob
from pallas.store.jobs import ClaimedJob
from pallas.store.sticker_habit import StickerHabitStore

HABIT_KIND = "stickers.habit_scan"
HABIT_SCAN = PeriodicJob(name="sticker_habit", kind=HABIT_KIND, every=timedelta(minutes=30))
CURSOR = "sticker_habit"
# Messages younger than this wait for the next scan: their pictures may still be being kept.
SETTLE = timedelta(minutes=10)
STEP = 2_000  # messages per transaction
MAX_STEPS = 500  # a run reads at most a million messages; the next run goes on


async def scan_sticker_habit(
    job: ClaimedJob, store: StickerHabitStore, clock: Callable[[], datetime]
) -> None:
    until = clock() - SETTLE
    messages = stickers = 0
    for _ in range(MAX_STEPS):
        step = await store.scan_step(CURSOR, until, STEP)
        messages += step.messages
        stickers += step.stickers
        if step.done:
            break
    if messages:
        logger.info("sticker habit: {} message(s) read, {} sticker(s) counted", messages, stickers)
