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
GATHER_S = 0.05


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
    """Asks for a message's pictures to be kept; never holds the message up.

    Asks are gathered for a moment (`GATHER_S`) and committed together, one transaction for
    a burst of pictures instead of one per message: an image message costs the ingress what a
    text message does. Lost in a crash within that moment, those pictures stay placeholders
    (docs/media.md); a turn that needs one fetches it itself (`media.describe`).
    """

    name = "media"

    def __init__(self, jobs: Jobs) -> None:
        self._jobs = jobs
        self._waiting: list[int] = []
        self._flush: asyncio.Task[None] | None = None

    async def on_message(self, stored: StoredMessage) -> StageResult:
        if wants_fetch(stored):
            self._waiting.append(stored.message_id)
            if self._flush is None or self._flush.done():
                self._flush = asyncio.create_task(self._enqueue(), name="media enqueue")
        return CONTINUE

    async def drain(self) -> None:
        """Wait until what was asked so far is committed (shutdown, tests)."""
        if self._flush is not None:
            await self._flush

    async def _enqueue(self) -> None:
        await asyncio.sleep(GATHER_S)
        ids, self._waiting = self._waiting, []
        items = [({"message_id": mid}, f"{FETCH_KIND}:{mid}") for mid in ids]
        try:
            await self._jobs.enqueue_many(FETCH_KIND, items)
        except Exception as exc:
            logger.warning("media: fetch of {} message(s) not queued: {!r}", len(ids), exc)


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
