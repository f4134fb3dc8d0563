"""Bench probe: acknowledge every message to the client with a `bench_ack` API call.

Loaded into both the real bot and the bare NoneBot. In the real bot matchers run only after
the ingress preprocessor returned, i.e. after the message row is committed, so the ack time
is an upper bound for "row committed".
"""

from __future__ import annotations

from nonebot import on_message
from nonebot.adapters.onebot.v11 import Bot, MessageEvent
from nonebot.plugin import PluginMetadata

__plugin_meta__ = PluginMetadata(
    name="bench probe",
    description="Acks every message with a bench_ack API call (benchmark only).",
    usage="Loaded by bench/run_pallas.py and bench/run_bare.py.",
)

probe = on_message(priority=1, block=False)


@probe.handle()
async def ack(bot: Bot, event: MessageEvent) -> None:
    await bot.call_api("bench_ack", message_id=event.message_id)
