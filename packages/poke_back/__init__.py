"""Poke-back glue: when someone pokes the bot, poke them back, within limits."""

from __future__ import annotations

import asyncio

from loguru import logger
from nonebot import on_notice
from nonebot.adapters.onebot.v11 import Bot, PokeNotifyEvent
from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.core.inbound import InboundMessage
from pallas.platform.onebot.send import poke_and_record, utc_now
from pallas.platform.onebot.translate import translate_event
from pallas.product.deterministic.poke_back import (
    PastPoke,
    PokeLimits,
    PokeRequest,
    PokeVerdict,
    decide_poke_back,
)
from pallas.store.recent import bot_pokes_since

__plugin_meta__ = PluginMetadata(
    name="poke_back",
    description="Pokes back whoever pokes the bot: once a minute per person, 3 per 5 minutes.",
    usage="Always on. See docs/deterministic-plugins.md.",
)

LIMITS = PokeLimits()

# One poke is decided at a time: two quick pokes must not both pass the limit check before
# the first poke back is recorded. Pokes are rare, so one lock for all streams is enough.
_one_at_a_time = asyncio.Lock()


async def _poked_me(event: PokeNotifyEvent) -> bool:
    return event.is_tome() and event.user_id != event.self_id


poked = on_notice(rule=_poked_me, priority=5, block=False)


@poked.handle()
async def poke_back(bot: Bot, event: PokeNotifyEvent) -> None:
    inbound = translate_event(event).event
    if not isinstance(inbound, InboundMessage):
        return
    runtime = current_runtime()
    async with _one_at_a_time:
        now = utc_now()
        sent = await bot_pokes_since(runtime.engine, inbound.stream, now - LIMITS.lookback)
        request = PokeRequest(inbound.sender.user_id, str(event.target_id), str(event.self_id))
        verdict = decide_poke_back(request, [PastPoke(p.target, p.time) for p in sent], now, LIMITS)
        if verdict is not PokeVerdict.POKE_BACK:
            logger.info("poke from {} not returned: {}", request.poker, verdict)
            return
        await poke_and_record(bot, runtime.ingress, inbound.stream, request.poker)
