"""Memory glue: extraction after turns, recall into the context, the memory tools, decay.

Off with `memory: {enabled: false}` in config/agent.yml: nothing is extracted or recalled and
the tools are not registered (what was stored stays). Its numbers change live in the
console's `memory` section; one group's memory in 功能开关. See docs/memory.md.
"""

from __future__ import annotations

from loguru import logger
from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.product.memory.feature import install_memory

__plugin_meta__ = PluginMetadata(
    name="memory",
    description="Remembers what is worth knowing about people and groups, and recalls it.",
    usage="On by default; `memory:` in config/agent.yml. See docs/memory.md.",
)

_runtime = current_runtime()
if _runtime.agent_config.memory.enabled:
    install_memory(_runtime.memory_host(), _runtime.agent_config.memory)
else:
    logger.info("memory is off (memory.enabled is false in config/agent.yml)")
