"""Outgoing messages are segment arrays; text that looks like CQ code stays text."""

from __future__ import annotations

import json

import pytest
from nonebot.utils import DataclassEncoder

from pallas.core.inbound import MediaRef, Segment, SegmentKind
from pallas.platform.onebot.outbound import (
    UnsendableSegmentError,
    text_message,
    to_onebot_message,
)


def wire(message: object) -> list[dict[str, object]]:
    """What the adapter puts on the WebSocket for the `message` parameter."""
    return json.loads(json.dumps(message, cls=DataclassEncoder))


def test_cq_code_lookalike_is_one_text_segment() -> None:
    payload = wire(text_message("[CQ:at,qq=all] 来 [CQ:image,file=http://evil]"))
    assert payload == [
        {"type": "text", "data": {"text": "[CQ:at,qq=all] 来 [CQ:image,file=http://evil]"}}
    ]


def test_mixed_segments_keep_their_order() -> None:
    message = to_onebot_message(
        [
            Segment(SegmentKind.REPLY, target="123"),
            Segment(SegmentKind.AT, target="42"),
            Segment(SegmentKind.TEXT, text=" 好的"),
            Segment(SegmentKind.IMAGE, media=MediaRef(url="https://example.invalid/a.png")),
        ]
    )
    assert [seg["type"] for seg in wire(message)] == ["reply", "at", "text", "image"]


def test_segments_the_bot_cannot_send_are_refused() -> None:
    with pytest.raises(UnsendableSegmentError):
        to_onebot_message([Segment(SegmentKind.FORWARD, text="[聊天记录]")])
