"""Repeater glue: echo a message once when two different people sent it in a row."""

from __future__ import annotations

from loguru import logger
from nonebot import on_message
from nonebot.adapters.onebot.v11 import Bot, GroupMessageEvent
from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.core.inbound import InboundMessage, StreamKey
from pallas.core.text import describe_inbound
from pallas.platform.onebot.send import send_and_record
from pallas.platform.onebot.translate import translate_event
from pallas.product.deterministic.repeat import (
    REPEAT_WINDOW,
    ContentKey,
    RecentLine,
    content_key,
    decide_repeat,
)
from pallas.store.recent import TimelineLine, lines_up_to
from pallas.store.sql import BoundedCache

__plugin_meta__ = PluginMetadata(
    name="repeater",
    description="Repeats a group message once after two different members sent it in a row.",
    usage="Always on in groups. See docs/deterministic-plugins.md.",
)

repeater = on_message(priority=5, block=False)


class LastContent:
    """Each group's newest content key: a prefilter so the timeline is read only when a
    message repeats its predecessor. A cache (bounded, empty after a restart), never the
    decision itself, which always comes from the timeline."""

    def __init__(self, capacity: int = 5_000) -> None:
        self._keys: BoundedCache[StreamKey, ContentKey] = BoundedCache(capacity)

    def repeats_previous(self, stream: StreamKey, key: ContentKey | None) -> bool:
        if key is None:  # pokes, recalls, empty text neither count nor break a run
            return False
        previous = self._keys.get(stream)
        self._keys.put_all({stream: key})
        return previous == key


_last_content = LastContent()


@repeater.handle()
async def repeat(bot: Bot, event: GroupMessageEvent) -> None:
    inbound = translate_event(event).event
    if not isinstance(inbound, InboundMessage):
        return
    if not _last_content.repeats_previous(inbound.stream, content_key(_as_line(inbound))):
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


def _as_line(msg: InboundMessage) -> RecentLine:
    return RecentLine(
        sender_person_id=0,
        from_bot=msg.from_bot,
        text=msg.text,
        segments=msg.segments,
        is_poke=msg.is_poke,
    )


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
