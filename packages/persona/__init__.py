"""Persona glue: attacks on the bot noticed (rage, silences, the automatic blacklist and the
owners' notice), favorability and relation notes in the context, warmth after turns, the
owner's commands. Knobs: `rage:` in config/agent.yml. See docs/persona.md."""

from __future__ import annotations

from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.product.persona.feature import install_persona

__plugin_meta__ = PluginMetadata(
    name="persona",
    description="Moods and relationships: rage and silence, favorability, relation notes.",
    usage="Always on; `rage:` in config/agent.yml. See docs/persona.md.",
)

_runtime = current_runtime()
install_persona(_runtime.persona_host(), _runtime.agent_config.rage)
