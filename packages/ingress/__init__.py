"""Ingress glue: every OneBot event is translated and persisted before NoneBot dispatches it.

It runs as the adapter's inbound hook (see pallas/platform/onebot/adapter.py), so no
preprocessor or matcher of any plugin sees an event that is not recorded, and duplicates,
the bot's own messages and unreadable events stop here.
"""

from __future__ import annotations

import nonebot
from loguru import logger
from nonebot.adapters.onebot.v11 import Bot, Event
from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.core.inbound import InboundMessage
from pallas.core.text import describe_inbound, excerpt
from pallas.platform.onebot.adapter import PallasOneBotAdapter
from pallas.platform.onebot.lookups import forwards_to_fetch
from pallas.platform.onebot.translate import UnsupportedEventError, translate_event
from pallas.store.identities import unknown_user_ids

__plugin_meta__ = PluginMetadata(
    name="ingress",
    description="Records every inbound message exactly once before anything decides on it.",
    usage="Always on.",
)

_SUMMARY_KEYS = (
    "post_type",
    "message_type",
    "notice_type",
    "sub_type",
    "message_id",
    "group_id",
    "user_id",
    "raw_message",
)


async def persist_inbound(bot: Bot, event: Event) -> bool:
    """Record the event; return whether NoneBot should go on dispatching it."""
    try:
        translation = translate_event(event)
    except UnsupportedEventError as exc:
        logger.warning("event ignored: {}: {}", exc, _summary(event))
        return False
    inbound = translation.event
    if inbound is None:
        return True  # meta events, requests, notices outside the timeline
    if translation.unknown_segment_types:
        logger.warning(
            "unknown segment types {} kept as placeholders: {}",
            list(translation.unknown_segment_types),
            describe_inbound(inbound),
        )
    if isinstance(inbound, InboundMessage) and inbound.truncated:
        logger.warning("oversized message truncated: {}", describe_inbound(inbound))
    runtime = current_runtime()
    result = await runtime.conversation.ingress.accept(inbound)
    if result.stored is not None and isinstance(inbound, InboundMessage):
        await _fill_in_later(bot, inbound)
    return result.should_continue


async def _fill_in_later(bot: Bot, msg: InboundMessage) -> None:
    """Forward content and the names of unknown @-mentioned members, fetched off this path."""
    others = [user for user in msg.mentions if user != msg.stream.self_id]
    if not others and not forwards_to_fetch(msg):
        return
    runtime = current_runtime()
    unknown = await unknown_user_ids(runtime.engine, msg.stream.platform, others)
    runtime.lookups.fill_in(bot, msg, unknown)


def _summary(event: Event) -> str:
    """The fields that identify an event, bounded; never the whole payload."""
    data = event.model_dump()
    known = {key: data[key] for key in _SUMMARY_KEYS if key in data}
    return excerpt(repr(known if len(known) > 2 else data), 200)


nonebot.get_adapter(PallasOneBotAdapter).set_inbound_hook(persist_inbound)
