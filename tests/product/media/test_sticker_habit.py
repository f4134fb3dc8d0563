"""The periodic sticker-habit run: it reads in steps until caught up, leaving the newest
messages (whose pictures may still be being kept) for the next run."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import MediaRef, Segment, SegmentKind
from pallas.product.media import sticker_habit
from pallas.product.media.describe import Labeller
from pallas.product.media.habit_store import StickerHabitStore
from pallas.product.media.sticker_habit import (
    HABIT_KIND,
    SETTLE,
    HabitDeps,
    run_habit_job,
    scan_sticker_habit,
)
from pallas.product.media.sticker_store import StickerLibrary
from pallas.product.memory.store import MemoryKind, MemoryStore
from pallas.product.ports import Facts
from pallas.providers.catalog import ModelType
from pallas.providers.manager import ModelManager
from pallas.store.asset_store import AssetLabel, AssetStore, StoredAsset
from pallas.store.jobs import ClaimedJob
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.providers.support import catalog, harness, model
from tests.support.fake_llm import FakeModelServer, Reply, Status
from tests.support.inbound import group, message
from tests.support.pictures import picture

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SHA = "c" * 64


async def test_a_run_reads_in_steps_until_caught_up(
    engine: AsyncEngine, writer: TimelineWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sticker_habit, "STEP", 2)
    segment = Segment(
        SegmentKind.IMAGE, text="[动画表情]", media=MediaRef(asset=f"asset:cc/{SHA}.gif")
    )
    written = []
    for minute in (0, 1, 2, 3, 4, 30):
        inbound = message("x", stream=group("h"), time=T0 + timedelta(minutes=minute))
        result = await writer.write(replace(inbound, segments=(segment,)))
        assert isinstance(result, MessageWritten)
        written.append(result)
    store = StickerHabitStore(engine)
    now = T0 + timedelta(minutes=30) + SETTLE / 2  # the last message is too young yet
    job = ClaimedJob(1, HABIT_KIND, {}, None, 1, 3, now)
    await scan_sticker_habit(job, store, lambda: now)
    [favourite] = await store.favourites(written[0].stream_id, written[0].person_id)
    assert favourite.count == 5
    later = now + SETTLE
    await scan_sticker_habit(job, store, lambda: later)
    [favourite] = await store.favourites(written[0].stream_id, written[0].person_id)
    assert favourite.count == 6


async def _habit_kit(
    engine: AsyncEngine, tmp_path: Path, manager: ModelManager, *, memory: bool = True
) -> tuple[HabitDeps, StoredAsset]:
    assets = AssetStore(engine, tmp_path / "assets")
    asset = await assets.put(picture("teal", (8, 8)), T0)
    facts = Facts()
    if memory:  # as the memory feature does at install
        facts.kept_by(MemoryStore(engine).remember)
    deps = HabitDeps(
        store=StickerHabitStore(engine),
        library=StickerLibrary(engine),
        facts=facts,
        assets=assets,
        labeller=Labeller(
            assets, manager, lambda: T0 + timedelta(hours=1), labels_per_hour=lambda: 5
        ),
        clock=lambda: T0 + timedelta(hours=1),
        habit_threshold=lambda: 5,
        collect_threshold=lambda: 5,
    )
    return deps, asset


async def test_a_flood_of_one_sticker_becomes_one_fact_and_one_collected_sticker(
    engine: AsyncEngine, writer: TimelineWriter, tmp_path: Path
) -> None:
    """500 identical stickers in a minute: counted, one fact, one label call, one sticker."""
    async with FakeModelServer() as server:
        manager = harness(catalog(server, [model("v", ModelType.VISION)])).manager
        deps, asset = await _habit_kit(engine, tmp_path, manager)
        server.script("up-v", Reply('{"description": "狗头笑", "emotions": ["哈哈"]}'))
        segment = Segment(
            SegmentKind.IMAGE, text="[动画表情]", media=MediaRef(asset=asset.reference)
        )
        for i in range(500):
            inbound = message("x", stream=group("flood"), time=T0 + timedelta(seconds=i / 10))
            written = await writer.write(replace(inbound, segments=(segment,)))
            assert isinstance(written, MessageWritten)
        job = ClaimedJob(1, HABIT_KIND, {}, None, 1, 3, T0)
        await run_habit_job(job, deps)
        await run_habit_job(job, deps)  # nothing new: nothing twice
        await manager.close()
    [favourite] = await deps.store.favourites(written.stream_id, written.person_id)
    assert favourite.count == 500
    facts = await MemoryStore(engine).entries(
        stream_id=written.stream_id, person_id=written.person_id, kind=MemoryKind.FACT
    )
    assert [(f.text, f.source) for f in facts] == [("常用表情包：狗头笑", "sticker_habit")]
    [collected] = await deps.library.enabled()
    assert (collected.caption, collected.emotions) == ("狗头笑", ("哈哈",))
    assert len(server.requests_for("up-v")) == 1


async def test_without_a_label_a_favourite_waits_for_a_later_run(
    engine: AsyncEngine, writer: TimelineWriter, tmp_path: Path
) -> None:
    async with FakeModelServer() as server:
        manager = harness(catalog(server, [model("v", ModelType.VISION)])).manager
        deps, asset = await _habit_kit(engine, tmp_path, manager)
        server.script("up-v", Status(500, "down"))
        segment = Segment(
            SegmentKind.IMAGE, text="[动画表情：旧说明]", media=MediaRef(asset=asset.reference)
        )
        for i in range(6):  # a described sticker still counts as a sticker
            inbound = message("x", stream=group("later"), time=T0 + timedelta(seconds=i))
            written = await writer.write(replace(inbound, segments=(segment,)))
            assert isinstance(written, MessageWritten)
        job = ClaimedJob(1, HABIT_KIND, {}, None, 1, 3, T0)
        await run_habit_job(job, deps)
        assert (
            await MemoryStore(engine).entries(
                stream_id=written.stream_id, person_id=written.person_id, kind=MemoryKind.FACT
            )
            == []
        )
        await deps.assets.set_label(asset.sha256, AssetLabel("猫猫无语", ("无语",)))
        await run_habit_job(job, deps)
        await manager.close()
    facts = await MemoryStore(engine).entries(
        stream_id=written.stream_id, person_id=written.person_id, kind=MemoryKind.FACT
    )
    assert [f.text for f in facts] == ["常用表情包：猫猫无语"]


async def test_with_memory_off_a_favourite_waits_unlabelled_for_memory(
    engine: AsyncEngine, writer: TimelineWriter, tmp_path: Path
) -> None:
    async with FakeModelServer() as server:
        manager = harness(catalog(server, [model("v", ModelType.VISION)])).manager
        deps, asset = await _habit_kit(engine, tmp_path, manager, memory=False)
        server.script("up-v", Reply('{"description": "狗头笑", "emotions": ["哈哈"]}'))
        segment = Segment(
            SegmentKind.IMAGE, text="[动画表情]", media=MediaRef(asset=asset.reference)
        )
        for i in range(6):
            inbound = message("x", stream=group("off"), time=T0 + timedelta(seconds=i))
            written = await writer.write(replace(inbound, segments=(segment,)))
            assert isinstance(written, MessageWritten)
        await run_habit_job(ClaimedJob(1, HABIT_KIND, {}, None, 1, 3, T0), deps)
        await manager.close()
    assert await MemoryStore(engine).entries(person_id=written.person_id) == []
    assert await deps.library.due_favourites(5, 10) != []  # still owed, once memory keeps facts
