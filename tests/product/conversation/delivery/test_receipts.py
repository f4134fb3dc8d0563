"""Receipt listeners and media in replies, on a real store with a real dispatcher: a listener
hears of each row the platform confirmed, once, with the row's marks; a reply's picture is a
row of its own, checked against the real assets folder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import MediaRef, Segment, SegmentKind
from pallas.platform.onebot.send import own_message
from pallas.product.conversation.delivery.contract import OutgoingMedia, OutgoingReply
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery, OutboxDispatcher
from pallas.product.conversation.delivery.payload import PayloadError, asset_checker
from pallas.product.media.sticker_store import StickerLibrary
from pallas.product.media.stickers import MARK, sticker_receipts
from pallas.store.asset_store import AssetStore, StoredAsset
from pallas.store.ledger import LedgerWriter
from pallas.store.models import OutboxItem
from pallas.store.outbox import OutboxRow, OutboxStatus, OutboxStore
from pallas.store.timeline import TimelineWriter
from tests.product.conversation.delivery.test_outbox import POLICY, Kit, Outlet, drained
from tests.support.fake_llm import silent_wav
from tests.support.inbound import group
from tests.support.pictures import picture
from tests.support.waiting import until, until_async

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CAPTION = "[动画表情：猫猫无语]"


@dataclass
class Rig:
    kit: Kit
    assets: AssetStore
    delivery: OutboxDelivery
    heard: list[tuple[int, Any]]

    @property
    def dispatcher(self) -> OutboxDispatcher:
        assert self.kit.dispatcher is not None
        return self.kit.dispatcher

    async def listen(self, row: OutboxRow) -> None:
        self.heard.append((row.id, row.payload.get("marks")))

    async def picture(self, color: str = "red") -> StoredAsset:
        return await self.assets.put(picture(color, (6, 6)), T0)

    async def reply(
        self,
        room: str,
        *bubbles: str,
        media: tuple[OutgoingMedia, ...] = (),
        quote: str | None = None,
    ) -> list[int]:
        sid = await self.kit.stream_id(room)
        reply = OutgoingReply(3, sid, group(room), bubbles, quote, True, media)
        return list((await self.delivery.deliver(reply)).queued)

    async def payloads(self, ids: list[int]) -> list[dict[str, Any]]:
        async with self.kit.engine.connect() as conn:
            query = select(OutboxItem.id, OutboxItem.payload).where(OutboxItem.id.in_(ids))
            found = {row.id: row.payload for row in await conn.execute(query)}
        return [found[i] for i in ids]

    async def statuses(self, ids: list[int]) -> list[str]:
        async with self.kit.engine.connect() as conn:
            query = select(OutboxItem.id, OutboxItem.status).where(OutboxItem.id.in_(ids))
            found = {row.id: row.status for row in await conn.execute(query)}
        return [found[i] for i in ids]


@pytest.fixture
async def rig(engine: AsyncEngine, tmp_path: Path) -> AsyncIterator[Rig]:
    ledger, timeline = LedgerWriter(engine), TimelineWriter(engine)
    ledger.start()
    timeline.start()
    kit = Kit(engine, OutboxStore(engine), ledger, timeline, Outlet(), lambda: datetime.now(UTC))
    kit.dispatcher = OutboxDispatcher(kit.store, kit.outlet, ledger, POLICY, kit.clock)
    assets = AssetStore(engine, tmp_path / "assets")
    delivery = OutboxDelivery(kit.store, kit.dispatcher, kit.clock, asset_checker(assets.folder))
    yield Rig(kit, assets, delivery, [])
    await kit.dispatcher.stop()
    await ledger.close()
    await timeline.close()


def sticker(asset: StoredAsset, text: str = CAPTION) -> OutgoingMedia:
    segment = Segment(SegmentKind.IMAGE, text=text, media=MediaRef(file=asset.reference))
    return OutgoingMedia(segment, {MARK: asset.sha256})


# Receipts.


async def test_each_confirmed_row_is_heard_once_with_its_marks(rig: Rig) -> None:
    rig.dispatcher.on_receipt(rig.listen)
    cat = await rig.picture()
    ids = await rig.reply("g1", "你说得对", "但是", media=(sticker(cat),))
    rig.dispatcher.start()
    await drained(rig.kit)
    await until(lambda: len(rig.heard) >= 3)  # a row is heard just after it is marked sent
    assert rig.heard == [(ids[0], None), (ids[1], None), (ids[2], {MARK: cat.sha256})]
    assert await rig.statuses(ids) == ["sent", "sent", "sent"]


async def test_a_row_sent_after_a_retry_is_heard_once(rig: Rig) -> None:
    rig.dispatcher.on_receipt(rig.listen)
    rig.kit.outlet.failures = 2
    cat = await rig.picture()
    [row] = await rig.reply("g1", media=(sticker(cat),))
    rig.dispatcher.start()
    await drained(rig.kit)
    await until(lambda: rig.heard)
    assert rig.heard == [(row, {MARK: cat.sha256})]
    assert rig.kit.outlet.attempts == 3


async def test_a_row_the_platform_never_confirmed_is_not_heard(rig: Rig) -> None:
    rig.dispatcher.on_receipt(rig.listen)
    rig.kit.outlet.failures = 100
    cat = await rig.picture()
    [row] = await rig.reply("g1", media=(sticker(cat),))
    rig.dispatcher.start()
    await drained(rig.kit)
    assert await rig.statuses([row]) == ["failed"]
    assert rig.heard == []


async def test_a_listener_that_raises_stops_neither_the_row_nor_the_others(rig: Rig) -> None:
    broken: list[int] = []

    async def explode(row: OutboxRow) -> None:
        broken.append(row.id)
        raise RuntimeError("counting went wrong")

    rig.dispatcher.on_receipt(explode)
    rig.dispatcher.on_receipt(rig.listen)
    cat = await rig.picture()
    ids = await rig.reply("g1", "好", media=(sticker(cat),))
    more = await rig.reply("g1", "还有")
    rig.dispatcher.start()
    await drained(rig.kit)
    await until(lambda: len(rig.heard) >= 3)
    assert await rig.statuses(ids + more) == ["sent", "sent", "sent"]
    assert broken == ids + more
    assert [row for row, _ in rig.heard] == ids + more
    assert [text for _, text, _ in rig.kit.outlet.sent] == ["好", CAPTION, "还有"]


async def test_a_sent_sticker_counts_in_the_collection_once(rig: Rig) -> None:
    library = StickerLibrary(rig.kit.engine)
    rig.dispatcher.on_receipt(sticker_receipts(library, lambda: T0))
    cat, dog = await rig.picture("red"), await rig.picture("green")
    await library.add(cat.sha256, "猫猫无语", ("无语",), "group", T0)
    await library.add(dog.sha256, "狗狗开心", ("开心",), "group", T0)
    await rig.reply("g1", "你看", media=(sticker(cat),))
    rig.dispatcher.start()
    await drained(rig.kit)

    async def counted() -> bool:  # the receipt is counted just after the row is marked sent
        return any(s.uses for s in await library.enabled())

    await until_async(counted)
    uses = {s.sha256: (s.uses, s.last_sent_at) for s in await library.enabled()}
    assert uses == {cat.sha256: (1, T0), dog.sha256: (0, None)}


async def test_a_sticker_send_confirmed_by_its_echo_after_a_crash_is_heard_once(
    rig: Rig,
) -> None:
    cat = await rig.picture()
    [row] = await rig.reply("g1", media=(sticker(cat),))
    now = datetime.now(UTC)
    await rig.kit.store.mark(row, OutboxStatus.SENDING, now)  # cut off mid-send
    # NapCat reports the sticker it sent under the bare placeholder, not the bot's caption.
    echo = Segment(SegmentKind.IMAGE, text="[动画表情]", media=MediaRef(url="http://x/s.gif"))
    await rig.kit.timeline.write(own_message(group("g1"), (echo,), "echo-1", now))
    rig.dispatcher.on_receipt(rig.listen)
    assert await rig.dispatcher.recover() == {"confirmed": 1, "resend": 0, "unknown": 0}
    rig.dispatcher.start()
    await drained(rig.kit)
    assert rig.heard == [(row, {MARK: cat.sha256})]
    assert rig.kit.outlet.sent == []  # never sent twice
    assert await rig.statuses([row]) == ["sent"]


# Media in a reply.


async def test_a_media_only_reply_is_one_row_with_the_quote_marks_and_bare_text(rig: Rig) -> None:
    cat = await rig.picture()
    [row] = await rig.reply("g1", media=(sticker(cat),), quote="8001")
    [payload] = await rig.payloads([row])
    assert payload["segments"] == [
        {"kind": "image", "text": CAPTION, "media": {"file": cat.reference}}
    ]
    assert payload["marks"] == {MARK: cat.sha256}
    assert payload["quote"] == "8001"
    assert payload["text"] == "[动画表情]"  # what NapCat's echo of it will read


async def test_with_words_the_quote_sits_on_the_first_bubble_only(rig: Rig) -> None:
    cat = await rig.picture()
    ids = await rig.reply("g1", "好", media=(sticker(cat),), quote="8002")
    first, picture_row = await rig.payloads(ids)
    assert (first["quote"], first["text"]) == ("8002", "好")
    assert "marks" not in first
    assert "quote" not in picture_row
    assert picture_row["marks"] == {MARK: cat.sha256}
    assert picture_row["text"] == "[动画表情]"
    rig.dispatcher.start()
    await drained(rig.kit)
    assert rig.kit.outlet.sent == [("g1", "好", "8002"), ("g1", CAPTION, None)]


async def test_a_picture_without_marks_has_none_and_a_voice_reads_bare(rig: Rig) -> None:
    cat = await rig.picture()
    spoken = await rig.assets.put(silent_wav(), T0, source="generated")
    plain = OutgoingMedia(
        Segment(SegmentKind.IMAGE, text="[图片：一只猫]", media=MediaRef(file=cat.reference))
    )
    voice = OutgoingMedia(
        Segment(SegmentKind.RECORD, text="[语音：明天见]", media=MediaRef(file=spoken.reference))
    )
    ids = await rig.reply("g1", media=(plain, voice))
    picture_row, voice_row = await rig.payloads(ids)
    assert "marks" not in picture_row and picture_row["text"] == "[图片]"
    assert "marks" not in voice_row and voice_row["text"] == "[语音]"
    assert voice_row["segments"][0]["media"] == {"file": spoken.reference}


async def test_a_reply_naming_a_missing_file_writes_nothing(rig: Rig) -> None:
    cat = await rig.picture()
    missing = StoredAsset("f" * 64, "ff/" + "f" * 64 + ".png", "image/png", 1, 1, 1)
    with pytest.raises(PayloadError, match="missing asset"):
        await rig.reply("g1", "看", media=(sticker(cat), sticker(missing)))
    assert await rig.kit.store.open_count() == 0
