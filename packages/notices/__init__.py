"""Welcome / farewell glue: registers the notices stage (greet joining members, see off leaving
ones, where the group enabled it)."""

from __future__ import annotations

from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.product.deterministic.notices import NOTICES_FILE
from pallas.product.deterministic.responders import NoticeStage

__plugin_meta__ = PluginMetadata(
    name="notices",
    description="Welcome and farewell messages on member join / leave; off unless enabled.",
    usage=f"Per group, in PALLAS_DATA_DIR/{NOTICES_FILE}. See docs/deterministic-plugins.md.",
)

_runtime = current_runtime()
_runtime.stages.register(NoticeStage(_runtime.responders))
