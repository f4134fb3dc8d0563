"""Repeater glue: registers the repeat stage (echo a line two different members sent in a row)."""

from __future__ import annotations

from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.product.deterministic.responders import RepeatStage

__plugin_meta__ = PluginMetadata(
    name="repeater",
    description="Repeats a group message once after two different members sent it in a row.",
    usage="Always on in groups. See docs/deterministic-plugins.md.",
)

_runtime = current_runtime()
_runtime.stages.register(RepeatStage(_runtime.responders))
