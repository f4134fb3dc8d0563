"""Media glue: the media stage asks for each picture people send to be kept in the asset store,
the `media.fetch` job keeps it, and the sticker-habit scan counts stickers (docs/media.md)."""

from __future__ import annotations

from functools import partial

import httpx
import nonebot
from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.product.media.fetching import FETCH_KIND, MediaDeps, MediaStage, fetch_message_media
from pallas.product.media.sticker_habit import HABIT_KIND, HABIT_SCAN, scan_sticker_habit

__plugin_meta__ = PluginMetadata(
    name="media",
    description="Keeps the pictures people send, once each, checked by content.",
    usage="Always on. See docs/media.md.",
)

_runtime = current_runtime()
_client = httpx.AsyncClient()
_deps = MediaDeps(_runtime.assets, _runtime.jobs, _client, _runtime.runner.clock)
_runtime.jobs.handle(FETCH_KIND, partial(fetch_message_media, deps=_deps), timeout_s=60.0)
_runtime.stages.register(MediaStage(_runtime.jobs))
_habit = partial(scan_sticker_habit, store=_runtime.sticker_habit, clock=_runtime.runner.clock)
_runtime.jobs.handle(HABIT_KIND, _habit, timeout_s=240.0)
_runtime.jobs.every(HABIT_SCAN)
nonebot.get_driver().on_shutdown(_client.aclose)
