"""The bot's sticker collection on SQLite and PostgreSQL with real files: adding (the owner's
word beats a label), what may be sent, uses counted, what the groups keep sending; and the
asset store's labels, sounds, and retention that never drops a collected sticker."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.assets import asset_file
from pallas.core.inbound import MediaRef, Segment, SegmentKind
from pallas.product.media.habit_store import StickerHabitStore
from pallas.product.media.retention import pruned_keeping_stickers
from pallas.product.media.sticker_store import Favourite, StickerLibrary
from pallas.product.media.tables import Sticker
from pallas.store.asset_store import AssetLabel, AssetStore, StoredAsset
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.fake_llm import silent_wav
from tests.support.inbound import group, message
from tests.support.pictures import picture

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
COLORS = ("red", "green", "blue", "yellow", "purple", "orange")


@dataclass
class Kit:
    engine: AsyncEngine
    assets: AssetStore
    library: StickerLibrary


@pytest.fixture
def kit(engine: AsyncEngine, tmp_path: Path) -> Kit:
    return Kit(engine, AssetStore(engine, tmp_path / "assets"), StickerLibrary(engine))


async def kept(kit: Kit, color: str, at: int = 0) -> StoredAsset:
    return await kit.assets.put(picture(color, (9, 9)), T0 + timedelta(minutes=at))


# The collection.


async def test_adding_again_keeps_the_first_caption_unless_replacing(kit: Kit) -> None:
    cat = await kept(kit, "red")
    await kit.library.add(cat.sha256, "猫猫无语", ("无语", "嫌弃"), "group", T0)
    await kit.library.add(cat.sha256, "一只猫", ("开心",), "group", T0 + timedelta(hours=1))
    [first] = await kit.library.enabled()
    assert (first.caption, first.emotions, first.source) == ("猫猫无语", ("无语", "嫌弃"), "group")
    await kit.library.count_sent(cat.sha256, T0 + timedelta(hours=2))
    await kit.library.count_sent(cat.sha256, T0 + timedelta(hours=3))
    await kit.library.add(
        cat.sha256, "主人说的", ("生气",), "owner", T0 + timedelta(hours=4), replace=True
    )
    [owned] = await kit.library.enabled()
    assert (owned.caption, owned.emotions, owned.source) == ("主人说的", ("生气",), "owner")
    assert (owned.uses, owned.last_sent_at) == (2, T0 + timedelta(hours=3))  # its history stays


async def test_the_owner_collecting_a_dropped_sticker_brings_it_back(kit: Kit) -> None:
    cat = await kept(kit, "red")
    await kit.library.add(cat.sha256, "猫猫无语", ("无语",), "group", T0)
    await kit.library.set_enabled(cat.sha256, False)
    await kit.library.add(cat.sha256, "猫猫无语", ("无语",), "group", T0)  # not the owner
    assert await kit.library.enabled() == []
    await kit.library.add(cat.sha256, "猫猫无语", ("无语",), "owner", T0, replace=True)
    assert [s.sha256 for s in await kit.library.enabled()] == [cat.sha256]


async def test_the_owners_first_collection_starts_at_no_uses(kit: Kit) -> None:
    cat = await kept(kit, "red")
    await kit.library.add(cat.sha256, "猫猫无语", ("无语",), "owner", T0, replace=True)
    [item] = await kit.library.enabled()
    assert (item.caption, item.source, item.uses, item.last_sent_at) == (
        "猫猫无语",
        "owner",
        0,
        None,
    )
    await kit.library.count_sent(cat.sha256, T0)
    [item] = await kit.library.enabled()
    assert item.uses == 1


async def test_a_long_caption_is_cut_to_fit(kit: Kit) -> None:
    cat = await kept(kit, "red")
    await kit.library.add(cat.sha256, "猫" * 200, (), "owner", T0)
    [item] = await kit.library.enabled()
    assert item.caption == "猫" * 80 and item.emotions == ()


async def test_what_may_be_sent_names_each_file_in_the_order_it_came(kit: Kit) -> None:
    red, green, blue = await kept(kit, "red"), await kept(kit, "green"), await kept(kit, "blue")
    await kit.library.add(green.sha256, "绿", ("开心",), "group", T0 + timedelta(minutes=2))
    await kit.library.add(red.sha256, "红", ("难过",), "owner", T0 + timedelta(minutes=1))
    await kit.library.add(blue.sha256, "蓝", (), "group", T0 + timedelta(minutes=3))
    items = await kit.library.enabled()
    assert [(s.sha256, s.path, s.caption) for s in items] == [
        (red.sha256, red.path, "红"),
        (green.sha256, green.path, "绿"),
        (blue.sha256, blue.path, "蓝"),
    ]
    assert all(s.reference == f"asset:{s.path}" for s in items)
    assert all(asset_file(kit.assets.folder, s.path).is_file() for s in items)
    assert all((s.uses, s.last_sent_at) == (0, None) for s in items)


async def test_a_disabled_sticker_is_hidden_until_enabled_again(kit: Kit) -> None:
    red, green = await kept(kit, "red"), await kept(kit, "green")
    await kit.library.add(red.sha256, "红", (), "group", T0)
    await kit.library.add(green.sha256, "绿", (), "group", T0 + timedelta(minutes=1))
    assert await kit.library.set_enabled(red.sha256, False) is True
    assert [s.sha256 for s in await kit.library.enabled()] == [green.sha256]
    assert await kit.library.set_enabled(red.sha256, True) is True
    assert [s.sha256 for s in await kit.library.enabled()] == [red.sha256, green.sha256]
    assert await kit.library.set_enabled("f" * 64, False) is False  # not in the collection


async def test_each_confirmed_send_counts_once(kit: Kit) -> None:
    red, green = await kept(kit, "red"), await kept(kit, "green")
    await kit.library.add(red.sha256, "红", (), "group", T0)
    await kit.library.add(green.sha256, "绿", (), "group", T0)
    await kit.library.count_sent(red.sha256, T0 + timedelta(minutes=5))
    await kit.library.count_sent(red.sha256, T0 + timedelta(minutes=9))
    await kit.library.count_sent("f" * 64, T0)  # a sticker no longer collected: nothing
    by_sha = {s.sha256: s for s in await kit.library.enabled()}
    assert (by_sha[red.sha256].uses, by_sha[red.sha256].last_sent_at) == (
        2,
        T0 + timedelta(minutes=9),
    )
    assert (by_sha[green.sha256].uses, by_sha[green.sha256].last_sent_at) == (0, None)


# What the groups keep sending (counted by the sticker-habit scan from the real timeline).


def sticker_segment(asset: StoredAsset | str) -> Segment:
    reference = asset.reference if isinstance(asset, StoredAsset) else asset
    return Segment(
        SegmentKind.IMAGE, text="[动画表情]", media=MediaRef(url="http://x", asset=reference)
    )


async def sent(
    writer: TimelineWriter, asset: StoredAsset | str, *, user: str, room: str, times: int
) -> MessageWritten:
    written = None
    for _ in range(times):
        inbound = replace(
            message("[动画表情]", stream=group(room), user_id=user, time=T0),
            segments=(sticker_segment(asset),),
        )
        written = await writer.write(inbound)
        assert isinstance(written, MessageWritten)
    assert written is not None
    return written


async def counted(engine: AsyncEngine) -> None:
    step = await StickerHabitStore(engine).scan_step("habit", T0 + timedelta(hours=1), 10_000)
    assert step.done


async def test_popular_means_often_in_one_group_whoever_sent_it(
    kit: Kit, writer: TimelineWriter
) -> None:
    shared, scattered, collected, loud = [await kept(kit, c) for c in COLORS[:4]]
    gone = "asset:dd/" + "d" * 64 + ".gif"  # counted once, its file since dropped
    await sent(writer, shared, user="1", room="g", times=2)
    await sent(writer, shared, user="2", room="g", times=2)  # 4 in group g, by two people
    await sent(writer, scattered, user="1", room="g", times=3)
    await sent(writer, scattered, user="1", room="h", times=3)  # 6 in all, 3 per group
    await sent(writer, collected, user="3", room="h", times=5)
    await sent(writer, loud, user="3", room="h", times=6)
    await sent(writer, gone, user="1", room="g", times=9)
    await counted(kit.engine)
    await kit.library.add(collected.sha256, "已经收藏", (), "owner", T0)
    assert await kit.library.popular_outside(4, 10) == [loud.sha256, shared.sha256]
    assert await kit.library.popular_outside(4, 1) == [loud.sha256]
    assert await kit.library.popular_outside(3, 10) == [
        loud.sha256,
        shared.sha256,
        scattered.sha256,
    ]
    assert await kit.library.popular_outside(7, 10) == []


async def test_a_sticker_popular_in_two_groups_is_named_once(
    kit: Kit, writer: TimelineWriter
) -> None:
    cat = await kept(kit, "red")
    await sent(writer, cat, user="1", room="g", times=4)
    await sent(writer, cat, user="2", room="h", times=5)
    await counted(kit.engine)
    assert await kit.library.popular_outside(4, 10) == [cat.sha256]


async def test_favourites_are_due_once_per_person_and_group(
    kit: Kit, writer: TimelineWriter
) -> None:
    cat, dog, bird = await kept(kit, "red"), await kept(kit, "green"), await kept(kit, "blue")
    ming = await sent(writer, cat, user="1", room="g", times=5)
    await sent(writer, dog, user="1", room="g", times=2)  # below the threshold
    hong = await sent(writer, bird, user="2", room="g", times=3)
    elsewhere = await sent(writer, cat, user="1", room="h", times=4)
    await sent(writer, "asset:ee/" + "e" * 64 + ".gif", user="1", room="g", times=8)  # no file
    await counted(kit.engine)
    due = await kit.library.due_favourites(3, 10)
    assert due == [
        Favourite(ming.stream_id, ming.person_id, cat.sha256, 5),
        Favourite(elsewhere.stream_id, elsewhere.person_id, cat.sha256, 4),
        Favourite(hong.stream_id, hong.person_id, bird.sha256, 3),
    ]
    assert await kit.library.due_favourites(3, 1) == due[:1]
    await kit.library.mark_promoted(due[0], T0 + timedelta(hours=2))
    assert await kit.library.due_favourites(3, 10) == due[1:]
    # More of the same sticker later does not make it due again.
    await sent(writer, cat, user="1", room="g", times=2)
    await StickerHabitStore(kit.engine).scan_step("habit", T0 + timedelta(hours=1), 10_000)
    assert await kit.library.due_favourites(3, 10) == due[1:]


# The asset store: retention, labels, sounds.


async def test_retention_never_drops_a_collected_sticker(kit: Kit) -> None:
    files = [await kept(kit, color, at=i) for i, color in enumerate(COLORS)]
    oldest = files[0]  # the least recently used: the first to go, were it not collected
    await kit.library.add(oldest.sha256, "最老的", ("开心",), "owner", T0)
    assert await pruned_keeping_stickers(kit.assets, 1) == len(COLORS) - 1
    assert await kit.assets.get(oldest.sha256) == oldest
    assert asset_file(kit.assets.folder, oldest.path).read_bytes() == picture(COLORS[0], (9, 9))
    assert await kit.assets.total_bytes() == oldest.size
    for dropped in files[1:]:
        assert await kit.assets.get(dropped.sha256) is None
        assert not asset_file(kit.assets.folder, dropped.path).exists()
    assert [s.sha256 for s in await kit.library.enabled()] == [oldest.sha256]
    async with kit.engine.connect() as conn:
        assert list(await conn.scalars(select(Sticker.sha256))) == [oldest.sha256]
    # only the collection is left: nothing to drop
    assert await pruned_keeping_stickers(kit.assets, 1) == 0


async def test_a_disabled_sticker_is_still_kept_by_retention(kit: Kit) -> None:
    cat, dog = await kept(kit, "red", at=0), await kept(kit, "green", at=1)
    await kit.library.add(cat.sha256, "猫", (), "group", T0)
    await kit.library.set_enabled(cat.sha256, False)
    assert await pruned_keeping_stickers(kit.assets, 0) == 1
    assert await kit.assets.get(cat.sha256) is not None
    assert await kit.assets.get(dog.sha256) is None


async def test_labels_are_kept_on_the_file(kit: Kit) -> None:
    cat, dog = await kept(kit, "red"), await kept(kit, "green")
    assert await kit.assets.label(cat.sha256) is None
    assert await kit.assets.label("f" * 64) is None
    await kit.assets.set_label(cat.sha256, AssetLabel("猫猫无语", ("无语", "嫌弃")))
    await kit.assets.set_label(dog.sha256, AssetLabel("一只小狗"))
    assert await kit.assets.label(cat.sha256) == AssetLabel("猫猫无语", ("无语", "嫌弃"))
    assert await kit.assets.label(dog.sha256) == AssetLabel("一只小狗", ())
    await kit.assets.set_label(cat.sha256, AssetLabel("猫猫生气", ("生气",)))
    assert await kit.assets.label(cat.sha256) == AssetLabel("猫猫生气", ("生气",))


async def test_the_labelling_budget_counts_the_calls_noted_since(kit: Kit) -> None:
    cat, dog, bird = await kept(kit, "red"), await kept(kit, "green"), await kept(kit, "blue")
    assert await kit.assets.labels_since(T0 - timedelta(days=1)) == 0
    await kit.assets.mark_labelling(cat.sha256, T0)
    await kit.assets.mark_labelling(dog.sha256, T0 + timedelta(minutes=30))
    assert await kit.assets.labels_since(T0) == 2
    assert await kit.assets.labels_since(T0 + timedelta(minutes=1)) == 1
    assert await kit.assets.labels_since(T0 + timedelta(hours=1)) == 0
    # A call noted without a label (the model failed) still counts; a label alone does not.
    await kit.assets.set_label(bird.sha256, AssetLabel("一只鸟"))
    assert await kit.assets.labels_since(T0) == 2
    assert await kit.assets.label(dog.sha256) is None


async def test_a_sound_is_kept_like_a_picture(kit: Kit) -> None:
    wav = silent_wav()
    stored = await kit.assets.put(wav, T0, source="generated")
    assert (stored.mime, stored.width, stored.height, stored.size) == ("audio/wav", 0, 0, len(wav))
    assert stored.path.endswith(".wav") and stored.reference == f"asset:{stored.path}"
    assert asset_file(kit.assets.folder, stored.path).read_bytes() == wav
    assert await kit.assets.put(wav, T0 + timedelta(minutes=1)) == stored
    assert await kit.assets.get(stored.sha256) == stored
