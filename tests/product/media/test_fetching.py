"""Keeping the pictures of stored messages, on a real store, real files and a local HTTP
server: the same picture twice is one file; what cannot be kept is skipped with a log line."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.assets import asset_file, asset_path
from pallas.core.inbound import MediaRef, Segment, SegmentKind
from pallas.platform.onebot.media_fetch import MediaLimits
from pallas.product.conversation.ingress import StoredMessage
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.media.fetching import (
    FETCH_KIND,
    MediaDeps,
    MediaStage,
    fetch_message_media,
)
from pallas.store.asset_store import AssetStore
from pallas.store.jobs import ClaimedJob, JobStore
from pallas.store.message_media import message_segments
from pallas.store.models import Job
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.fake_web import FakeWebServer, Page
from tests.support.inbound import message
from tests.support.pictures import picture

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def image(url: str) -> Segment:
    return Segment(SegmentKind.IMAGE, text="[图片]", media=MediaRef(url=url), raw_type="image")


@dataclass
class Kit:
    engine: AsyncEngine
    writer: TimelineWriter
    web: FakeWebServer
    deps: MediaDeps

    async def store(self, *segments: Segment) -> StoredMessage:
        inbound = replace(message("看图"), segments=segments)
        written = await self.writer.write(inbound)
        assert isinstance(written, MessageWritten)
        return StoredMessage(written.message_id, written.stream_id, written.person_id, inbound)

    async def fetch(self, message_id: int) -> list[dict[str, object]]:
        job = ClaimedJob(1, FETCH_KIND, {"message_id": message_id}, None, 1, 5, T0)
        await fetch_message_media(job, self.deps)
        return await message_segments(self.engine, message_id)


@pytest.fixture
async def kit(engine: AsyncEngine, writer: TimelineWriter, tmp_path: Path) -> AsyncIterator[Kit]:
    async with FakeWebServer() as web, httpx.AsyncClient() as client:
        jobs = Jobs(JobStore(engine), lambda: T0)
        limits = MediaLimits(max_bytes=64 * 1024, timeout_s=1.0)
        store = AssetStore(engine, tmp_path / "assets")
        yield Kit(engine, writer, web, MediaDeps(store, jobs, client, lambda: T0, limits))


async def test_the_same_picture_twice_is_kept_once_and_noted_on_the_message(kit: Kit) -> None:
    kit.web.routes["/a.png"] = Page(picture("red", (5, 5)), content_type="image/png")
    kit.web.routes["/b.png"] = Page(
        picture("red", (5, 5)), content_type="image/png"
    )  # same bytes, other URL
    stored = await kit.store(image(kit.web.url("/a.png")), image(kit.web.url("/b.png")))
    segments = await kit.fetch(stored.message_id)
    refs = [s["media"]["asset"] for s in segments]  # type: ignore[index]
    assert refs[0] == refs[1] and str(refs[0]).startswith("asset:")
    relative = asset_path(str(refs[0]))
    assert relative is not None
    assert asset_file(kit.deps.assets.folder, relative).read_bytes() == picture("red", (5, 5))
    assert len([p for p in kit.deps.assets.folder.rglob("*") if p.is_file()]) == 1
    assert [s["text"] for s in segments] == ["[图片]", "[图片]"]  # the placeholder stays


async def test_what_cannot_be_kept_is_skipped_and_the_rest_kept(kit: Kit) -> None:
    kit.web.routes["/ok.png"] = Page(picture("blue", (5, 5)), content_type="image/png")
    kit.web.routes["/fake.png"] = Page(b"<html>not a picture</html>", content_type="image/png")
    kit.web.routes["/gone.png"] = Page(b"", status=404)
    kit.web.routes["/slow.png"] = Page(picture("red", (5, 5)), delay_s=5.0)
    no_url = Segment(SegmentKind.IMAGE, text="[图片]", media=MediaRef(), raw_type="image")
    stored = await kit.store(
        image(kit.web.url("/fake.png")),
        image(kit.web.url("/gone.png")),
        image(kit.web.url("/slow.png")),
        no_url,
        image(kit.web.url("/ok.png")),
    )
    segments = await kit.fetch(stored.message_id)
    assets = [bool((s.get("media") or {}).get("asset")) for s in segments]  # type: ignore[union-attr]
    assert assets == [False, False, False, False, True]
    # A second run fetches nothing again.
    before = len(kit.web.requests)
    await kit.fetch(stored.message_id)
    assert len(kit.web.requests) == before + 3  # only the three that failed are tried again


async def test_the_stage_asks_for_a_fetch_without_waiting_and_only_for_pictures(
    kit: Kit,
) -> None:
    kit.deps.jobs.handle(FETCH_KIND, lambda _job: asyncio.sleep(0))  # type: ignore[arg-type]
    stage = MediaStage(kit.deps.jobs)
    text_only = await kit.store(Segment(SegmentKind.TEXT, text="你好"))
    picture = await kit.store(image(kit.web.url("/a.png")))
    assert (await stage.on_message(text_only)).reason == ""
    assert (await stage.on_message(picture)).reason == ""
    await stage.drain()
    async with kit.engine.connect() as conn:
        keys = (await conn.execute(select(Job.idempotency_key))).scalars().all()
    assert keys == [f"{FETCH_KIND}:{picture.message_id}"]


async def test_a_burst_of_pictures_is_asked_for_together_and_once(kit: Kit) -> None:
    kit.deps.jobs.handle(FETCH_KIND, lambda _job: asyncio.sleep(0))  # type: ignore[arg-type]
    stage = MediaStage(kit.deps.jobs)
    pictures = [await kit.store(image(kit.web.url(f"/{i}.png"))) for i in range(5)]
    for stored in pictures:
        await stage.on_message(stored)
    await stage.on_message(pictures[0])  # the platform delivered one again
    await stage.drain()
    async with kit.engine.connect() as conn:
        keys = (await conn.execute(select(Job.idempotency_key))).scalars().all()
    assert sorted(keys) == sorted(f"{FETCH_KIND}:{p.message_id}" for p in pictures)
