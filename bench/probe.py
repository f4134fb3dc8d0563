"""Bench probe: acknowledge every message to the client with a `bench_ack` API call.

Loaded into both the real bot and the bare NoneBot. The call carries the message id and,
in the real bot, `committed_at`: the `time.monotonic()` at which the message's row was
committed (stamped by `bench.commit_clock`; None in the bare NoneBot). In the real bot
matchers run only after the ingress hook (commit, then the gate's admission) has returned, so
the ack comes after the commit, later by admission and NoneBot's dispatch.
"""

from __future__ import annotations

from nonebot import on_message
from nonebot.adapters.onebot.v11 import Bot, MessageEvent
from nonebot.plugin import PluginMetadata

from bench.commit_clock import committed_at

__plugin_meta__ = PluginMetadata(
    name="bench probe",
    description="Acks every message with a bench_ack API call (benchmark only).",
    usage="Loaded by bench/run_pallas.py and bench/run_bare.py.",
)

probe = on_message(priority=1, block=False)


@probe.handle()
async def ack(bot: Bot, event: MessageEvent) -> None:
    # The same call in both bots (None where nothing stamps commits), so both pay alike.
    committed = committed_at(str(event.message_id))
    await bot.call_api("bench_ack", message_id=event.message_id, committed_at=committed)
