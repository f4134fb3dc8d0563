"""Repeater glue: echo a message once when two different people sent it in a row."""

from __future__ import annotations

from loguru import logger
from nonebot import on_message
from nonebot.adapters.onebot.v11 import Bot, GroupMessageEvent
from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.core.inbound import InboundMessage
from pallas.core.text import describe_inbound
from pallas.platform.onebot.send import send_and_record
from pallas.platform.onebot.translate import translate_event
from pallas.product.deterministic.repeat import REPEAT_WINDOW, RecentLine, decide_repeat
from pallas.store.recent import TimelineLine, lines_up_to

__plugin_meta__ = PluginMetadata(
    name="repeater",
    description="Repeats a group message once after two different members sent it in a row.",
    usage="Always on in groups. See docs/deterministic-plugins.md.",
)

repeater = on_message(priority=5, block=False)


@repeater.handle()
async def repeat(bot: Bot, event: GroupMessageEvent) -> None:
    inbound = translate_event(event).event
    if not isinstance(inbound, InboundMessage):
        return
    runtime = current_runtime()
    rows = await lines_up_to(
        runtime.engine, inbound.stream, inbound.platform_message_id, REPEAT_WINDOW
    )
    decision = decide_repeat([_recent(row) for row in rows])
    if decision is None:
        return
    logger.info("repeating after {}", describe_inbound(inbound))
    await send_and_record(bot, runtime.ingress, inbound.stream, decision.segments)


def _recent(row: TimelineLine) -> RecentLine:
    return RecentLine(
        sender_person_id=row.sender_person_id,
        from_bot=row.from_bot,
        text=row.text,
        segments=row.segments,
        is_poke=row.is_poke,
        recalled=row.recalled,
        suppressed=row.suppressed,
    )
