"""The sticker-habit scan: every 30 minutes, the stickers sent since the last scan are counted
per group, person and sticker (deterministic: no model on this path; docs/media.md).

After counting, two things follow from the counts, each needing the sticker's label (kept on
the file; a file never described borrows the hourly labelling budget, and waits for the next
run when it is spent):
- a person's favourite past the habit threshold becomes a fact about them in that group,
  "常用表情包：<caption>", with source `sticker_habit`;
- a sticker a group keeps sending joins the bot's own collection, for it to send back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from loguru import logger

from pallas.core.facts import MemoryKind, NewMemory
from pallas.product.conversation.jobs.periodic import PeriodicJob
from pallas.product.media.describe import Labeller
from pallas.product.media.habit_store import StickerHabitStore
from pallas.product.media.sticker_store import StickerLibrary
from pallas.product.ports import Facts
from pallas.store.asset_store import AssetLabel, AssetStore
from pallas.store.jobs import ClaimedJob

HABIT_KIND = "stickers.habit_scan"
HABIT_SCAN = PeriodicJob(name="sticker_habit", kind=HABIT_KIND, every=timedelta(minutes=30))
CURSOR = "sticker_habit"
# Messages younger than this wait for the next scan: their pictures may still be being kept.
SETTLE = timedelta(minutes=10)
STEP = 2_000  # messages per transaction
MAX_STEPS = 500  # a run reads at most a million messages; the next run goes on
FAVOURITE_PREFIX = "常用表情包："
HABIT_SOURCE = "sticker_habit"


MAX_PER_RUN = 20  # favourites promoted, stickers collected per run (each may need a label)


@dataclass
class HabitDeps:
    store: StickerHabitStore
    library: StickerLibrary
    facts: Facts  # where a favourite becomes a fact about the person (memory keeps it)
    assets: AssetStore
    labeller: Labeller | None  # None: no vision model; only files labelled before count
    clock: Callable[[], datetime]
    # Asked at every run: the console may change them.
    habit_threshold: Callable[[], int]
    collect_threshold: Callable[[], int]


async def run_habit_job(job: ClaimedJob, deps: HabitDeps) -> None:
    await scan_sticker_habit(job, deps.store, deps.clock)
    await promote_favourites(job, deps)
    await collect_popular(deps)


async def promote_favourites(job: ClaimedJob, deps: HabitDeps) -> None:
    if not deps.facts.kept:  # memory is off: the favourites wait, unlabelled, until it is on
        return
    due = await deps.library.due_favourites(deps.habit_threshold(), MAX_PER_RUN)
    for favourite in due:
        label = await _label(favourite.sha256, deps, "a favourite sticker")
        if label is None:
            continue
        fact = NewMemory(
            kind=MemoryKind.FACT,
            stream_id=favourite.stream_id,
            person_id=favourite.person_id,
            text=f"{FAVOURITE_PREFIX}{label.description}",
            source=HABIT_SOURCE,
            confidence=0.9,
        )
        now = deps.clock()
        await deps.facts.remember([fact], now, actor=f"job:{job.id}")
        await deps.library.mark_promoted(favourite, now)
        logger.info(
            "sticker habit: person {} in chat {} favours {} ({} uses)",
            favourite.person_id,
            favourite.stream_id,
            label.description,
            favourite.count,
        )


async def collect_popular(deps: HabitDeps) -> None:
    for sha in await deps.library.popular_outside(deps.collect_threshold(), MAX_PER_RUN):
        label = await _label(sha, deps, "a popular sticker")
        if label is not None:
            await deps.library.add(sha, label.description, label.emotions, "group", deps.clock())


async def _label(sha: str, deps: HabitDeps, why: str) -> AssetLabel | None:
    asset = await deps.assets.get(sha)
    if asset is None:
        return None
    if deps.labeller is None:
        return await deps.assets.label(sha)
    return await deps.labeller.label(asset, sticker=True, why=why)


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
