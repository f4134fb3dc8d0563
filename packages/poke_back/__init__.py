"""Poke-back glue: registers the poke-back stage (poke back whoever pokes the bot)."""

from __future__ import annotations

from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.product.deterministic.responders import PokeBackStage

__plugin_meta__ = PluginMetadata(
    name="poke_back",
    description="Pokes back whoever pokes the bot: once a minute per person, 3 per 5 minutes.",
    usage="Always on. See docs/deterministic-plugins.md.",
)

_runtime = current_runtime()
_runtime.stages.register(PokeBackStage(_runtime.responders))
