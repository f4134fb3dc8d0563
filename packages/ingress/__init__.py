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
from pallas.platform.onebot.translate import UnsupportedEventError, translate_event

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
    result = await current_runtime().ingress.accept(inbound)
    return result.should_continue


def _summary(event: Event) -> str:
    """The fields that identify an event, bounded; never the whole payload."""
    data = event.model_dump()
    known = {key: data[key] for key in _SUMMARY_KEYS if key in data}
    return excerpt(repr(known if len(known) > 2 else data), 200)


nonebot.get_adapter(PallasOneBotAdapter).set_inbound_hook(persist_inbound)
