"""Persona glue: attacks on the bot noticed (rage, silences, the automatic blacklist and the
owners' notice; the model's own judgment too), favorability and relation notes in the
context, warmth after turns, the bot's own voice, one follow-up after a private reply,
promises to owners, the owner's commands. Knobs: `rage:`, `follow_up:`, `promises:` in
config/agent.yml, changed live in the console's sections of the same names. See
docs/persona.md."""

from __future__ import annotations

from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.product.persona.feature import PersonaConfigs, install_persona

__plugin_meta__ = PluginMetadata(
    name="persona",
    description="Moods and relationships: rage and silence, favorability, relation notes.",
    usage="Always on; `rage:`, `follow_up:`, `promises:` in config/agent.yml (docs/persona.md).",
)

_runtime = current_runtime()
_config = _runtime.agent_config
install_persona(
    _runtime.persona_host(),
    PersonaConfigs(_config.rage, _config.follow_up, _config.promises),
)
