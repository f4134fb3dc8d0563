"""Outgoing OneBot v11 calls, and the timeline records of what the bot did.

Messages always go out as segment arrays (see outbound.py). A failed call (an error from
NapCat, a timeout, a lost connection) costs one warning line and returns None / False; a
record is made only after NapCat confirmed the action, so a failure leaves no false fact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from loguru import logger
from nonebot.adapters.onebot.v11 import Bot
from nonebot.exception import AdapterException

from pallas.core.clock import utc_now
from pallas.core.inbound import (
    InboundMessage,
    Segment,
    SegmentKind,
    Sender,
    StreamKey,
    StreamKind,
    poke_id,
)
from pallas.core.text import excerpt, render_plain_text
from pallas.platform.onebot.outbound import UnsendableSegmentError, to_onebot_message

Clock = Callable[[], datetime]


class Recorder(Protocol):
    """Where the bot's own actions are recorded (the ingress, so they dedupe with echoes)."""

    async def accept(self, item: InboundMessage) -> object: ...


async def send_message(
    bot: Bot, stream: StreamKey, segments: Sequence[Segment], via_group: str | None = None
) -> str | None:
    """Send to a group or private chat; the platform message id, or None if not sent.

    `via_group`: the group a temporary private chat came through. NapCat needs it to route
    a message to someone who is not a friend.
    """
    if stream.kind is StreamKind.GROUP:
        action, target = "send_group_msg", {"group_id": int(stream.external_id)}
    else:
        action, target = "send_private_msg", {"user_id": int(stream.external_id)}
        if via_group is not None:
            target["group_id"] = int(via_group)
    try:
        data = await bot.call_api(action, **target, message=to_onebot_message(segments))
    except (AdapterException, UnsendableSegmentError) as exc:
        logger.warning("{} to {} failed: {!r}", action, _where(stream), exc)
        return None
    message_id = data.get("message_id") if isinstance(data, dict) else None
    if message_id is None:
        logger.warning("{} to {}: answer has no message id, not recorded", action, _where(stream))
        return None
    return str(message_id)


async def poke(bot: Bot, stream: StreamKey, user_id: str) -> bool:
    """NapCat's poke actions; True once NapCat confirmed it."""
    if stream.kind is StreamKind.GROUP:
        action, target = "group_poke", {"group_id": int(stream.external_id)}
    else:
        action, target = "friend_poke", {}
    try:
        await bot.call_api(action, **target, user_id=int(user_id))
    except AdapterException as exc:
        logger.warning("{} of {} in {} failed: {!r}", action, user_id, _where(stream), exc)
        return False
    return True


async def send_and_record(
    bot: Bot,
    recorder: Recorder,
    stream: StreamKey,
    segments: Sequence[Segment],
    clock: Clock = utc_now,
    via_group: str | None = None,
    wire: Sequence[Segment] | None = None,
) -> str | None:
    """Send `wire` (the segments with their files inlined; default `segments`) and record
    `segments`: the timeline keeps `asset:` references, never a file's bytes."""
    message_id = await send_message(bot, stream, wire or segments, via_group)
    if message_id is not None:
        await recorder.accept(own_message(stream, tuple(segments), message_id, clock()))
    return message_id


async def poke_and_record(
    bot: Bot, recorder: Recorder, stream: StreamKey, user_id: str, clock: Clock = utc_now
) -> bool:
    poked = await poke(bot, stream, user_id)
    if poked:
        await recorder.accept(own_poke(stream, user_id, clock()))
    return poked


async def lookup_nickname(bot: Bot, user_id: str) -> str | None:
    """The user's QQ nickname, or None if NapCat cannot say."""
    try:
        data: Any = await bot.call_api("get_stranger_info", user_id=int(user_id))
    except AdapterException as exc:
        logger.warning("get_stranger_info for {} failed: {!r}", user_id, exc)
        return None
    nickname = data.get("nickname") if isinstance(data, dict) else None
    return str(nickname) if nickname else None


def own_message(
    stream: StreamKey, segments: tuple[Segment, ...], platform_message_id: str, time: datetime
) -> InboundMessage:
    """What the bot just sent, in the shape NapCat's echo of it would be recorded in."""
    return InboundMessage(
        stream=stream,
        sender=Sender(user_id=stream.self_id),
        platform_message_id=platform_message_id,
        time=time,
        segments=segments,
        text=render_plain_text(segments),
        mentions=tuple(s.target for s in segments if s.kind is SegmentKind.AT and s.target),
        reply_to=next((s.target for s in segments if s.kind is SegmentKind.REPLY), None),
        from_bot=True,
    )


def own_poke(stream: StreamKey, target: str, time: datetime) -> InboundMessage:
    """The bot's poke, shaped like translate.py shapes a poke notice (same synthetic id)."""
    segment = Segment(
        SegmentKind.OTHER, text=f"[戳一戳 → {target}]", target=target, raw_type="poke"
    )
    return InboundMessage(
        stream=stream,
        sender=Sender(user_id=stream.self_id),
        platform_message_id=poke_id(stream.self_id, target, int(time.timestamp())),
        time=time,
        segments=(segment,),
        text=segment.text,
        mentions=(target,),
        is_poke=True,
        from_bot=True,
    )


def _where(stream: StreamKey) -> str:
    return excerpt(f"{stream.kind}:{stream.external_id}", 60)
