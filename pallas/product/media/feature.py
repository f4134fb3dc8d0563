"""Media as a feature on the seam: keeping pictures, understanding them when a turn needs
it, the sticker habit and collection, sticker and voice replies, the owner's sticker
commands (docs/media.md). Off with PALLAS_FEATURES_OFF=["media"]."""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import partial

import httpx
from loguru import logger

from pallas.product.extensions import CoreServices, Extension, Plugs
from pallas.product.llm.tools.registry import FunctionPlugin
from pallas.product.media.config import MediaConfig, MediaKeys
from pallas.product.media.console import PAGE as STICKER_PAGE
from pallas.product.media.console import sticker_routes
from pallas.product.media.describe import DescribeDeps, Labeller, describe_message
from pallas.product.media.fetching import FETCH_KIND, MediaDeps, MediaStage, fetch_message_media
from pallas.product.media.habit_store import StickerHabitStore
from pallas.product.media.retention import MAX_ASSET_BYTES, PRUNE, PRUNE_KIND, prune_assets
from pallas.product.media.settings import media_section
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
from pallas.product.media.sticker_store import StickerLibrary
from pallas.product.media.sticker_tools import sticker_tools
from pallas.product.media.stickers import StickerReply, sticker_receipts
from pallas.product.media.voice import VoiceReply
from pallas.product.settings.applied import Live
from pallas.providers.catalog import ModelType
from pallas.store.retention import scan_holds

FETCH_TIMEOUT_S = 60.0
DESCRIBE_TIMEOUT_S = 90.0
HABIT_TIMEOUT_S = 240.0


@dataclass
class _Media:
    """What media's parts are built from: the core's ports and media's own stores."""

    plugs: Plugs
    core: CoreServices
    habit: StickerHabitStore
    library: StickerLibrary
    client: httpx.AsyncClient


def media_extension(config: MediaConfig | None = None) -> Extension:
    """Media as a feature; `config` stands in for the agent file's `media:` (tests)."""
    return Extension(
        name="media",
        install=partial(install_media, config=config),
        summary="收图片、看图听语音、学表情包习惯、用表情包和语音回复",
        config=MediaKeys,
    )


def install_media(plugs: Plugs, config: MediaConfig | None = None) -> None:
    """Sticker and voice replies are installed whatever the switches say: the console's
    `media` section turns them on and off, and changes the numbers, while the bot runs."""
    core = plugs.core
    config = config or plugs.config.media
    client = httpx.AsyncClient()
    plugs.add_lifespan(_nothing, client.aclose, name="media http client")
    media = _Media(plugs, core, StickerHabitStore(core.engine),
                   StickerLibrary(core.engine), client)  # fmt: skip
    live = Live(config)  # what the parts read where they act; the console changes it
    plugs.add_section(media_section(core.settings_table, live))
    labeller = Labeller(core.assets, core.models, core.clock, lambda: live().labels_per_hour)
    _keep_pictures(media)
    describe = _understand(media, labeller, live)
    _habit(media, labeller, live)
    _stickers(media, live)
    plugs.add_reply_form(VoiceReply(core.models, core.assets, core.clock, live))
    plugs.add_api_routes(sticker_routes(media.library, core.assets, core.clock))
    plugs.add_owner_page(STICKER_PAGE)
    for command in (
        CollectStickerCommand(media.library, describe, core.clock),
        StickerListCommand(media.library),
        DropStickerCommand(media.library),
    ):
        plugs.add_command(command)
    # the pictures, stickers and voices media keeps, under their cap
    plugs.add_job(PRUNE_KIND, partial(prune_assets, store=core.assets, max_bytes=MAX_ASSET_BYTES))
    plugs.add_periodic_job(PRUNE)


async def _nothing() -> None:
    """The client needs no start."""


def _keep_pictures(media: _Media) -> None:
    core = media.core
    deps = MediaDeps(core.assets, core.jobs, media.client, core.clock)
    media.plugs.add_job(
        FETCH_KIND, partial(fetch_message_media, deps=deps), timeout_s=FETCH_TIMEOUT_S
    )
    media.plugs.add_stage(MediaStage(core.jobs))


def _understand(media: _Media, labeller: Labeller, config: Live[MediaConfig]) -> DescribeDeps:
    core = media.core
    arrivals = Arrivals()
    deps = DescribeDeps(core.assets, core.models, labeller, media.client, arrivals, core.clock)
    media.plugs.add_job(
        DESCRIBE_KIND, partial(describe_message, deps=deps), timeout_s=DESCRIBE_TIMEOUT_S
    )
    vision, voice = core.models.has(ModelType.VISION), core.models.has(ModelType.ASR)
    if not vision:
        logger.info("media: no `vision` model is registered; pictures stay placeholders")
    if not voice:
        logger.info("media: no `asr` model is registered; voices stay placeholders")
    sight = Sight(
        core.engine, core.jobs, arrivals,
        wait_s=lambda: config().sight_wait_s, vision=vision, voice=voice,
    )  # fmt: skip
    media.plugs.add_preparer(sight)
    return deps


def _habit(media: _Media, labeller: Labeller, config: Live[MediaConfig]) -> None:
    core = media.core
    deps = HabitDeps(
        store=media.habit,
        library=media.library,
        facts=core.facts,
        assets=core.assets,
        labeller=labeller,
        clock=core.clock,
        habit_threshold=lambda: config().habit_threshold,
        collect_threshold=lambda: config().collect_threshold,
    )
    media.plugs.add_job(HABIT_KIND, partial(run_habit_job, deps=deps), timeout_s=HABIT_TIMEOUT_S)
    media.plugs.add_periodic_job(HABIT_SCAN)
    # what the scan has yet to read stays until it has
    media.plugs.add_retention_hold("sticker_habit", partial(scan_holds, core.engine, CURSOR))


def _stickers(media: _Media, config: Live[MediaConfig]) -> None:
    rng = random.Random
    media.plugs.add_receipt_listener(sticker_receipts(media.library, media.core.clock))
    media.plugs.add_tool_plugin(
        FunctionPlugin(
            "sticker", "表情包：查找、随回复发一张", common=sticker_tools(media.library, rng)
        )
    )
    reply = StickerReply(
        media.library, rng, media.core.features, enabled=lambda: config().sticker_replies
    )
    media.plugs.add_reply_form(reply)


EXTENSION = media_extension()
