"""Plugging media into the core: keeping pictures, understanding them when a turn needs it,
the sticker habit and collection, sticker and voice replies, the owner's sticker commands
(docs/media.md)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial

import httpx
from loguru import logger

from pallas.product.conversation.commands import CommandStage
from pallas.product.conversation.delivery.dispatcher import OutboxDispatcher
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.conversation.retention import RetentionHolders
from pallas.product.conversation.stages import StageList
from pallas.product.llm.agent.reply_forms import ReplyForm
from pallas.product.llm.assembler.context import TurnPreparer
from pallas.product.llm.tools.registry import FunctionPlugin, ToolRegistry
from pallas.product.media.config import MediaConfig
from pallas.product.media.describe import DescribeDeps, Labeller, describe_message
from pallas.product.media.fetching import FETCH_KIND, MediaDeps, MediaStage, fetch_message_media
from pallas.product.media.settings import MediaParts, media_section
from pallas.product.media.sight import DESCRIBE_KIND, Arrivals, Sight
from pallas.product.media.sticker_commands import (
    CollectStickerCommand,
    DropStickerCommand,
    StickerListCommand,
)
from pallas.product.media.sticker_habit import (
    CURSOR,
    HABIT_KIND,
    HABIT_SCAN,
    HabitDeps,
    run_habit_job,
)
from pallas.product.media.sticker_tools import sticker_tools
from pallas.product.media.stickers import StickerReply, sticker_receipts
from pallas.product.media.voice import VoiceReply
from pallas.product.settings.features import FeatureGate
from pallas.product.settings.registry import SettingsRegistry
from pallas.providers.catalog import ModelType
from pallas.providers.manager import ModelManager
from pallas.store.asset_store import AssetStore
from pallas.store.memory import MemoryStore
from pallas.store.retention import scan_holds
from pallas.store.settings_table import SettingsTable
from pallas.store.sticker_habit import StickerHabitStore
from pallas.store.sticker_library import StickerLibrary

FETCH_TIMEOUT_S = 60.0
DESCRIBE_TIMEOUT_S = 90.0
HABIT_TIMEOUT_S = 240.0


@dataclass
class MediaHost:
    """What media plugs into."""

    assets: AssetStore
    models: ModelManager
    jobs: Jobs
    stages: StageList
    commands: CommandStage
    dispatcher: OutboxDispatcher
    registry: ToolRegistry
    preparers: list[TurnPreparer]
    reply_forms: list[ReplyForm]
    memory: MemoryStore
    habit: StickerHabitStore
    library: StickerLibrary
    clock: Callable[[], datetime]
    client: httpx.AsyncClient
    settings: SettingsRegistry  # where the `media` section is registered
    settings_table: SettingsTable
    features: FeatureGate | None = None  # each group's switches (sticker replies)
    retention: RetentionHolders | None = None  # told what the sticker scan has yet to read


def install_media(host: MediaHost, config: MediaConfig) -> None:
    """Sticker and voice replies are installed whatever the switches say: the console's
    `media` section turns them on and off, and changes the numbers, while the bot runs."""
    labeller = Labeller(host.assets, host.models, host.clock, config.labels_per_hour)
    _keep_pictures(host)
    describe, sight = _understand(host, labeller, config)
    habit = _habit(host, labeller, config)
    stickers = _stickers(host)
    voice = VoiceReply(host.models, host.assets, host.clock, config.tts_voice)
    host.reply_forms.append(voice)
    for command in (
        CollectStickerCommand(host.library, describe, host.clock),
        StickerListCommand(host.library),
        DropStickerCommand(host.library),
    ):
        host.commands.register(command)
    parts = MediaParts(labeller, sight, habit, stickers, voice)
    host.settings.register(media_section(host.settings_table, config, parts))


def _keep_pictures(host: MediaHost) -> None:
    deps = MediaDeps(host.assets, host.jobs, host.client, host.clock)
    host.jobs.handle(FETCH_KIND, partial(fetch_message_media, deps=deps), timeout_s=FETCH_TIMEOUT_S)
    host.stages.register(MediaStage(host.jobs))


def _understand(
    host: MediaHost, labeller: Labeller, config: MediaConfig
) -> tuple[DescribeDeps, Sight]:
    arrivals = Arrivals()
    deps = DescribeDeps(host.assets, host.models, labeller, host.client, arrivals, host.clock)
    host.jobs.handle(
        DESCRIBE_KIND, partial(describe_message, deps=deps), timeout_s=DESCRIBE_TIMEOUT_S
    )
    vision, voice = host.models.has(ModelType.VISION), host.models.has(ModelType.ASR)
    if not vision:
        logger.info("media: no `vision` model is registered; pictures stay placeholders")
    if not voice:
        logger.info("media: no `asr` model is registered; voices stay placeholders")
    sight = Sight(
        host.assets.engine,
        host.jobs,
        arrivals,
        wait_s=config.sight_wait_s,
        vision=vision,
        voice=voice,
    )
    host.preparers.append(sight)
    return deps, sight


def _habit(host: MediaHost, labeller: Labeller, config: MediaConfig) -> HabitDeps:
    deps = HabitDeps(
        store=host.habit,
        library=host.library,
        memory=host.memory,
        assets=host.assets,
        labeller=labeller,
        clock=host.clock,
        habit_threshold=config.habit_threshold,
        collect_threshold=config.collect_threshold,
    )
    host.jobs.handle(HABIT_KIND, partial(run_habit_job, deps=deps), timeout_s=HABIT_TIMEOUT_S)
    host.jobs.every(HABIT_SCAN)
    if host.retention is not None:  # what the scan has yet to read stays until it has
        host.retention.hold("sticker_habit", partial(scan_holds, host.assets.engine, CURSOR))
    return deps


def _stickers(host: MediaHost) -> StickerReply:
    rng = random.Random
    host.dispatcher.on_receipt(sticker_receipts(host.library, host.clock))
    host.registry.register_plugin(
        FunctionPlugin(
            "sticker", "表情包：查找、随回复发一张", common=sticker_tools(host.library, rng)
        )
    )
    reply = StickerReply(host.library, rng, host.features)
    host.reply_forms.append(reply)
    return reply
