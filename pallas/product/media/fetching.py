"""Keeping the pictures people send: off the ingress path, as a durable job per message.

  image message stored -> MediaStage (continues at once) -> job `media.fetch` (its own task)
  -> each image segment with a platform URL and no asset yet: fetch (size and time caps)
  -> checked by content and kept once by hash -> `media.asset` on the segment

A picture that cannot be fetched or is not what it claims is logged and skipped; the message
and its placeholder text stay as they are, and the turn never waits for this.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import httpx
from loguru import logger

from pallas.core.inbound import SegmentKind
from pallas.core.media import NotMedia
from pallas.platform.onebot.media_fetch import MediaLimits, MediaUnavailable, fetch_media
from pallas.product.conversation.ingress import CONTINUE, StageResult, StoredMessage
from pallas.product.conversation.jobs.registry import Jobs
from pallas.store.asset_store import AssetStore
from pallas.store.jobs import ClaimedJob
from pallas.store.message_media import message_segments

FETCH_KIND = "media.fetch"


@dataclass
class MediaDeps:
    assets: AssetStore
    jobs: Jobs
    client: httpx.AsyncClient
    clock: Callable[[], datetime]
    limits: MediaLimits = field(default_factory=MediaLimits)


def wants_fetch(stored: StoredMessage) -> bool:
    return not stored.message.from_bot and any(
        s.kind is SegmentKind.IMAGE and s.media is not None and s.media.url and not s.media.asset
        for s in stored.message.segments
    )


class MediaStage:
    """Asks for a message's pictures to be kept; never holds the message up."""

    name = "media"

    def __init__(self, jobs: Jobs) -> None:
        self._jobs = jobs
        self._pending: set[asyncio.Task[None]] = set()

    async def on_message(self, stored: StoredMessage) -> StageResult:
        if wants_fetch(stored):
            # The enqueue commits in a task of its own: the gate does not wait for it. Lost in
            # a crash within those milliseconds, the picture stays a placeholder (docs/media.md).
            task = asyncio.create_task(self._enqueue(stored.message_id), name="media enqueue")
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)
        return CONTINUE

    async def _enqueue(self, message_id: int) -> None:
        try:
            await self._jobs.enqueue(
                FETCH_KIND, {"message_id": message_id}, key=f"{FETCH_KIND}:{message_id}"
            )
        except Exception as exc:
            logger.warning("media: fetch of message {} not queued: {!r}", message_id, exc)


async def fetch_message_media(job: ClaimedJob, deps: MediaDeps) -> None:
    message_id = int(job.payload["message_id"])
    segments = await message_segments(deps.assets.engine, message_id)
    kept: dict[int, str] = {}
    for index, segment in enumerate(segments):
        media = segment.get("media") or {}
        if segment.get("kind") != SegmentKind.IMAGE.value or not media.get("url"):
            continue
        if media.get("asset"):
            continue
        reference = await _keep(media["url"], message_id, deps)
        if reference:
            kept[index] = reference
    await deps.assets.record_on_message(message_id, kept)


async def _keep(url: str, message_id: int, deps: MediaDeps) -> str:
    try:
        data = await fetch_media(deps.client, url, deps.limits)
        stored = await deps.assets.put(data, deps.clock())
    except (MediaUnavailable, NotMedia) as exc:
        logger.info("media: a picture of message {} not kept: {}", message_id, exc)
        return ""
    return stored.reference
