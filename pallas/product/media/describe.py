"""The `media.describe` job: a message's pictures described, its voices transcribed, and the
same timeline row rewritten with what they hold.

  message -> each picture: its file (fetched now if the fetch job has not kept it yet)
  -> the file's label, if any message with the same file was described before (no model call)
  -> else, within the hourly labelling budget, the vision model's label, kept on the file
  -> each voice: its file -> the transcription model's words
  -> "[图片]" becomes "[图片：一只猫趴在键盘上]", "[语音]" becomes "[语音：明天几点集合]"

Every failure (no file, a model that fails or answers nonsense, the budget spent) leaves that
placeholder as it was, with a log line. The turn waiting for the message hears of it either way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx
from loguru import logger

from pallas.core.assets import asset_file, asset_path
from pallas.core.inbound import SegmentKind
from pallas.core.media import (
    TRANSCRIBABLE,
    UNDESCRIBED,
    VOICE_PLACEHOLDER,
    NotMedia,
    described,
    is_sticker_text,
)
from pallas.platform.onebot.media_fetch import MediaLimits, MediaUnavailable, fetch_media
from pallas.product.media.sight import Arrivals
from pallas.product.media.vision import clean_description, look
from pallas.providers.catalog import ModelType
from pallas.providers.errors import ProviderError
from pallas.providers.manager import ModelManager
from pallas.providers.results import CallTag, Purpose
from pallas.store.asset_store import AssetLabel, AssetStore, StoredAsset
from pallas.store.jobs import ClaimedJob
from pallas.store.message_media import message_segments

MAX_TRANSCRIPT_CHARS = 500
BUDGET_WINDOW = timedelta(hours=1)


@dataclass
class Labeller:
    """A kept file's label: the one on record, else the vision model's within the hourly
    budget (every call is noted on the file before it is made: a crash still counts it)."""

    assets: AssetStore
    models: ModelManager
    clock: Callable[[], datetime]
    labels_per_hour: Callable[[], int]  # asked at every label: the console may change it

    async def label(self, asset: StoredAsset, *, sticker: bool, why: str) -> AssetLabel | None:
        known = await self.assets.label(asset.sha256)
        if known is not None or not self.models.has(ModelType.VISION):
            return known
        now = self.clock()
        spent = await self.assets.labels_since(now - BUDGET_WINDOW)
        if spent >= self.labels_per_hour():
            logger.info("media: labelling budget spent ({}/h); {} not described", spent, why)
            return None
        await self.assets.mark_labelling(asset.sha256, now)
        label = await self._look(asset, sticker, why)
        if label is not None:
            await self.assets.set_label(asset.sha256, label)
        return label

    async def _look(self, asset: StoredAsset, sticker: bool, why: str) -> AssetLabel | None:
        try:
            data = asset_file(self.assets.folder, asset.path).read_bytes()
            tag = CallTag(Purpose.VISION)
            label = await look(self.models, data, asset.mime, sticker=sticker, tag=tag)
        except (OSError, ProviderError) as exc:
            logger.warning("media: {} not described: {!r}", why, exc)
            return None
        if label is None:
            logger.warning("media: {} not described: the vision model's answer holds no label", why)
        return label


@dataclass
class DescribeDeps:
    assets: AssetStore
    models: ModelManager
    labeller: Labeller
    client: httpx.AsyncClient
    arrivals: Arrivals
    clock: Callable[[], datetime]
    limits: MediaLimits = field(default_factory=MediaLimits)


async def describe_message(job: ClaimedJob, deps: DescribeDeps) -> None:
    message_id = int(job.payload["message_id"])
    try:
        segments = await message_segments(deps.assets.engine, message_id)
        texts: dict[int, str] = {}
        for index, segment in enumerate(segments):
            text = await _understood(segment, message_id, index, deps)
            if text:
                texts[index] = text
        await deps.assets.rewrite_texts(message_id, texts)
    finally:
        deps.arrivals.arrived(message_id)


async def _understood(
    segment: dict[str, Any], message_id: int, index: int, deps: DescribeDeps
) -> str:
    """The segment's new text, or empty to leave it as it is."""
    kind, text = segment.get("kind"), str(segment.get("text", ""))
    if kind == SegmentKind.IMAGE.value and text in UNDESCRIBED:
        asset = await file_of(segment, message_id, index, deps)
        if asset is None:
            return ""
        why = f"a picture of message {message_id}"
        label = await deps.labeller.label(asset, sticker=is_sticker_text(text), why=why)
        return described(text, label.description) if label else ""
    if kind == SegmentKind.RECORD.value and text == VOICE_PLACEHOLDER:
        asset = await file_of(segment, message_id, index, deps)
        words = await _transcribe(asset, message_id, deps) if asset else ""
        return described(text, words) if words else ""
    return ""


async def file_of(
    segment: dict[str, Any], message_id: int, index: int, deps: DescribeDeps
) -> StoredAsset | None:
    """The segment's kept file; fetched and kept now when it has none yet."""
    media = segment.get("media") or {}
    relative = asset_path(str(media.get("asset", "")))
    if relative:
        return await deps.assets.get(relative.rsplit("/", 1)[-1].split(".", 1)[0])
    url = str(media.get("url", ""))
    if not url:
        logger.info("media: segment {} of message {} names no file", index, message_id)
        return None
    try:
        data = await fetch_media(deps.client, url, deps.limits)
        asset = await deps.assets.put(data, deps.clock())
    except (MediaUnavailable, NotMedia, OSError) as exc:
        logger.info("media: a file of message {} not kept: {}", message_id, exc)
        return None
    await deps.assets.record_on_message(message_id, {index: asset.reference})
    return asset


async def _transcribe(asset: StoredAsset, message_id: int, deps: DescribeDeps) -> str:
    if not deps.models.has(ModelType.ASR):
        return ""
    if asset.mime not in TRANSCRIBABLE:
        logger.info(
            "media: the voice of message {} is {}, which transcription services do not read",
            message_id,
            asset.mime,
        )
        return ""
    try:
        data = asset_file(deps.assets.folder, asset.path).read_bytes()
        result = await deps.models.transcribe(
            data, asset.path.rsplit("/", 1)[-1], tag=CallTag(Purpose.TRANSCRIPTION)
        )
    except (OSError, ProviderError) as exc:
        logger.warning("media: the voice of message {} not transcribed: {!r}", message_id, exc)
        return ""
    return clean_description(result.text, MAX_TRANSCRIPT_CHARS)
