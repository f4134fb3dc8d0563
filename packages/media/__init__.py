"""Media glue: pictures people send kept once each, pictures and voices understood when a turn
needs them, the sticker habit and the bot's sticker collection, sticker and voice replies, the
owner's sticker commands. Knobs: `media:` in config/agent.yml, changed live in the console's
`media` section. See docs/media.md."""

from __future__ import annotations

import httpx
import nonebot
from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.product.media.feature import install_media

__plugin_meta__ = PluginMetadata(
    name="media",
    description="Keeps and understands pictures and voices; learns and sends stickers.",
    usage="Always on; `media:` in config/agent.yml. See docs/media.md.",
)

_runtime = current_runtime()
_client = httpx.AsyncClient()
install_media(_runtime.media_host(_client), _runtime.agent_config.media)
nonebot.get_driver().on_shutdown(_client.aclose)
