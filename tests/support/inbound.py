"""Builders of core inbound shapes for store- and product-level tests."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from pallas.core.inbound import (
    InboundMessage,
    MemberChange,
    Recall,
    Segment,
    SegmentKind,
    Sender,
    StreamKey,
    StreamKind,
)

BOT_ID = "10000"
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
_ids = itertools.count(1)


def group(external_id: str = "500", self_id: str = BOT_ID) -> StreamKey:
    return StreamKey("qq", self_id, StreamKind.GROUP, external_id)


def message(
    text: str = "你好",
    *,
    stream: StreamKey | None = None,
    user_id: str = "42",
    nickname: str = "小明",
    platform_message_id: str | None = None,
    from_bot: bool = False,
    time: datetime = T0,
    mentions: tuple[str, ...] = (),
    reply_to: str | None = None,
    is_poke: bool = False,
    role: str = "",
) -> InboundMessage:
    return InboundMessage(
        stream=stream or group(),
        sender=Sender(user_id=user_id, nickname=nickname, role=role),
        platform_message_id=platform_message_id or f"p{next(_ids)}",
        time=time,
        segments=(Segment(SegmentKind.TEXT, text=text),),
        text=text,
        from_bot=from_bot,
        mentions=mentions,
        reply_to=reply_to,
        is_poke=is_poke,
    )


def private(user_id: str = "42", self_id: str = BOT_ID) -> StreamKey:
    return StreamKey("qq", self_id, StreamKind.PRIVATE, user_id)


def recall(platform_message_id: str, *, stream: StreamKey | None = None) -> Recall:
    return Recall(stream or group(), platform_message_id, "42", T0)


def member_change(user_id: str, *, joined: bool, stream: StreamKey | None = None) -> MemberChange:
    return MemberChange(stream or group(), user_id, "0", joined, T0, "approve")
