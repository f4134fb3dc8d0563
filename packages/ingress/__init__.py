"""Ingress glue: every OneBot event is translated and persisted before any handler runs."""

from __future__ import annotations

from loguru import logger
from nonebot.adapters.onebot.v11 import Event
from nonebot.exception import IgnoredException
from nonebot.message import event_preprocessor
from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.core.inbound import InboundMessage
from pallas.core.text import describe_inbound, excerpt
from pallas.platform.onebot.translate import UnsupportedEventError, translate_event

__plugin_meta__ = PluginMetadata(
    name="ingress",
    description="Records every inbound message exactly once before anything decides on it.",
    usage="Always on.",
)


@event_preprocessor
async def persist_inbound(event: Event) -> None:
    try:
        translation = translate_event(event)
    except UnsupportedEventError as exc:
        logger.warning("event ignored: {}: {}", exc, _summary(event))
        raise IgnoredException(str(exc)) from None
    inbound = translation.event
    if inbound is None:
        return
    if translation.unknown_segment_types:
        logger.warning(
            "unknown segment types {} kept as placeholders: {}",
            list(translation.unknown_segment_types),
            describe_inbound(inbound),
        )
    if isinstance(inbound, InboundMessage) and inbound.truncated:
        logger.warning("oversized message truncated: {}", describe_inbound(inbound))
    result = await current_runtime().ingress.accept(inbound)
    if not result.should_continue:
        raise IgnoredException(result.outcome.value)


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


def _summary(event: Event) -> str:
    """The fields that identify an event, bounded; never the whole payload."""
    data = event.model_dump()
    known = {key: data[key] for key in _SUMMARY_KEYS if key in data}
    return excerpt(repr(known if len(known) > 2 else data), 200)
