"""The `media.describe` job on a real store, real files, a local file server and the fake model
server: placeholders rewritten in the same row, a file described once, the hourly budget, and
every bad input ending with the placeholder kept and the waiting turn told."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import MediaRef, Segment, SegmentKind
from pallas.platform.onebot.media_fetch import MediaLimits
from pallas.product.media.describe import DescribeDeps, Labeller, describe_message
from pallas.product.media.sight import DESCRIBE_KIND, Arrivals
from pallas.providers.catalog import ModelType
from pallas.store.asset_store import AssetStore
from pallas.store.jobs import ClaimedJob
from pallas.store.message_media import message_segments
from pallas.store.models import Message
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.providers.support import catalog, harness, model
from tests.support.fake_llm import SILENT_WAV, FakeModelServer, Reply, Status
from tests.support.fake_web import FakeWebServer, Page
from tests.support.inbound import message
from tests.support.pictures import picture

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
VISION, ASR = "up-v", "up-a"
CAT = '{"description": "一只橘猫", "emotions": []}'


def picture_segment(url: str = "", label: str = "[图片]") -> Segment:
    return Segment(SegmentKind.IMAGE, text=label, media=MediaRef(url=url), raw_type="image")


def voice_segment(url: str) -> Segment:
    return Segment(SegmentKind.RECORD, text="[语音]", media=MediaRef(url=url), raw_type="record")


@dataclass
class Kit:
    engine: AsyncEngine
    writer: TimelineWriter
    web: FakeWebServer
    models: FakeModelServer
    deps: DescribeDeps
    now: list[datetime]

    async def store(self, *segments: Segment) -> int:
        inbound = replace(message("看"), segments=(Segment(SegmentKind.TEXT, "看"), *segments))
        written = await self.writer.write(inbound)
        assert isinstance(written, MessageWritten)
        return written.message_id

    async def describe(self, message_id: int) -> str:
        job = ClaimedJob(1, DESCRIBE_KIND, {"message_id": message_id}, None, 1, 5, T0)
        await describe_message(job, self.deps)
        segments = await message_segments(self.engine, message_id)
        return "".join(str(s.get("text", "")) for s in segments)

    def serve(self, path: str, body: bytes, content_type: str = "image/png") -> str:
        self.web.routes[path] = Page(body, content_type=content_type)
        return self.web.url(path)


@pytest.fixture
async def kit(engine: AsyncEngine, writer: TimelineWriter, tmp_path: Path) -> AsyncIterator[Kit]:
    async with FakeWebServer() as web, FakeModelServer() as server, httpx.AsyncClient() as client:
        specs = [model("v", ModelType.VISION), model("a", ModelType.ASR)]
        manager = harness(catalog(server, specs)).manager
        now = [T0]
        assets = AssetStore(engine, tmp_path / "assets")
        labeller = Labeller(assets, manager, lambda: now[0], labels_per_hour=lambda: 2)
        limits = MediaLimits(max_bytes=64 * 1024, timeout_s=1.0)
        deps = DescribeDeps(assets, manager, labeller, client, Arrivals(), lambda: now[0], limits)
        yield Kit(engine, writer, web, server, deps, now)
        await manager.close()


async def test_a_picture_is_described_in_its_own_row_and_a_copy_reuses_the_label(
    kit: Kit,
) -> None:
    kit.models.script(VISION, Reply(CAT))
    first = await kit.store(picture_segment(kit.serve("/a.png", picture("orange", (6, 6)))))
    second = await kit.store(picture_segment(kit.serve("/b.png", picture("orange", (6, 6)))))

    assert await kit.describe(first) == "看[图片：一只橘猫]"
    assert await kit.describe(second) == "看[图片：一只橘猫]"  # same bytes: no second call
    assert len(kit.models.requests_for(VISION)) == 1
    text = await _message_text(kit, first)
    assert text == "看[图片：一只橘猫]"


async def test_the_hourly_budget_stops_labelling_until_the_hour_has_passed(kit: Kit) -> None:
    kit.models.script(VISION, Reply(CAT), Reply(CAT), Reply(CAT))
    ids = [
        await kit.store(picture_segment(kit.serve(f"/{i}.png", picture(color, (4, 4)))))
        for i, color in enumerate(("red", "green", "blue"))
    ]
    texts = [await kit.describe(mid) for mid in ids]
    assert texts == ["看[图片：一只橘猫]", "看[图片：一只橘猫]", "看[图片]"]  # 2 per hour
    kit.now[0] = T0 + timedelta(hours=1, seconds=1)
    assert await kit.describe(ids[2]) == "看[图片：一只橘猫]"
    assert len(kit.models.requests_for(VISION)) == 3


@pytest.mark.parametrize(
    "answer",
    [Status(500, "boom"), Reply("我看不清这张图。"), Reply('{"description": "[]<>"}')],
    ids=["the vision model fails", "prose instead of a label", "a label of nothing"],
)
async def test_a_failed_look_keeps_the_placeholder_and_tells_the_turn(
    kit: Kit, answer: Status | Reply
) -> None:
    kit.models.script(VISION, answer)
    mid = await kit.store(picture_segment(kit.serve("/x.png", picture("red", (4, 4)))))
    waiting = kit.deps.arrivals.expect([mid])[0]
    assert await kit.describe(mid) == "看[图片]"
    assert waiting.is_set()
    assert await kit.deps.assets.labels_since(T0 - timedelta(hours=1)) == 1  # it was spent


@pytest.mark.parametrize(
    "segment",
    [
        picture_segment(""),  # neither url nor file
        picture_segment("http://127.0.0.1:9/never.png"),  # nothing answers there
        picture_segment("file:///etc/passwd"),  # not a URL this fetches
    ],
    ids=["no url", "unreachable", "not http"],
)
async def test_a_picture_that_cannot_be_had_stays_a_placeholder(kit: Kit, segment: Segment) -> None:
    mid = await kit.store(segment)
    waiting = kit.deps.arrivals.expect([mid])[0]
    assert await kit.describe(mid) == "看[图片]"
    assert waiting.is_set()
    assert kit.models.requests_for(VISION) == []


async def test_a_file_that_is_not_a_picture_is_refused_before_any_model(kit: Kit) -> None:
    mid = await kit.store(picture_segment(kit.serve("/pdf.png", b"%PDF-1.7 " + b"x" * 64)))
    assert await kit.describe(mid) == "看[图片]"
    assert kit.models.requests_for(VISION) == []


async def test_a_voice_is_transcribed_and_silk_is_left_alone(kit: Kit) -> None:
    kit.models.script(ASR, Reply("明天 几点 集合？"))
    wav = await kit.store(voice_segment(kit.serve("/v.wav", SILENT_WAV, "audio/wav")))
    assert await kit.describe(wav) == "看[语音：明天 几点 集合？]"
    silk = b"\x02#!SILK_V3" + bytes(64)
    raw = await kit.store(voice_segment(kit.serve("/v.silk", silk, "audio/silk")))
    assert await kit.describe(raw) == "看[语音]"
    assert len(kit.models.requests_for(ASR)) == 1


async def test_many_turns_waiting_on_one_message_all_hear_of_it(kit: Kit) -> None:
    kit.models.script(VISION, Reply(CAT))
    mid = await kit.store(picture_segment(kit.serve("/w.png", picture("red", (4, 4)))))
    first = kit.deps.arrivals.expect([mid])[0]
    second = kit.deps.arrivals.expect([mid])[0]
    await kit.describe(mid)
    await asyncio.wait_for(asyncio.gather(first.wait(), second.wait()), timeout=1)


async def _message_text(kit: Kit, message_id: int) -> str:
    async with kit.engine.connect() as conn:
        return str(await conn.scalar(select(Message.text).where(Message.id == message_id)))
