"""Ingress glue: every OneBot event is translated and persisted before any handler runs."""

from __future__ import annotations

from loguru import logger
from nonebot.adapters.onebot.v11 import Event
from nonebot.exception import IgnoredException
from nonebot.message import event_preprocessor
from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.core.text import excerpt
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
        logger.warning("event ignored: {}: {}", exc, excerpt(repr(event.model_dump()), 160))
        raise IgnoredException(str(exc)) from None
    if translation.unknown_segment_types:
        logger.warning(
            "unknown segment types {} kept as placeholders", list(translation.unknown_segment_types)
        )
    inbound = translation.event
    if inbound is None:
        return
    if getattr(inbound, "truncated", False):
        logger.warning("oversized message truncated: {}", excerpt(getattr(inbound, "text", "")))
    result = await current_runtime().ingress.accept(inbound)
    if not result.should_continue:
        raise IgnoredException(result.outcome.value)
