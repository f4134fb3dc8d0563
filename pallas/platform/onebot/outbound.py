"""Core segments -> OneBot v11 segment arrays. Text is never parsed as CQ code."""

from __future__ import annotations

from collections.abc import Iterable

from nonebot.adapters.onebot.v11 import Message, MessageSegment

from pallas.core.inbound import Segment, SegmentKind


class UnsendableSegmentError(ValueError):
    """A segment kind the bot does not send."""


def to_onebot_message(segments: Iterable[Segment]) -> Message:
    """Build the outgoing message segment by segment (never from a string)."""
    message = Message()
    for segment in segments:
        message.append(_to_onebot_segment(segment))
    return message


def text_message(text: str) -> Message:
    return to_onebot_message([Segment(SegmentKind.TEXT, text=text)])


def _to_onebot_segment(segment: Segment) -> MessageSegment:
    match segment.kind:
        case SegmentKind.TEXT:
            return MessageSegment.text(segment.text)
        case SegmentKind.AT if segment.target:
            return MessageSegment.at(segment.target)
        case SegmentKind.AT_ALL:
            return MessageSegment.at("all")
        case SegmentKind.REPLY if segment.target:
            return MessageSegment.reply(int(segment.target))
        case SegmentKind.FACE if segment.target:
            return MessageSegment.face(int(segment.target))
        case SegmentKind.IMAGE if segment.media is not None:
            return MessageSegment.image(segment.media.url or segment.media.file)
        case SegmentKind.MARKET_FACE if segment.detail_value("key"):
            # NapCat sends a market face from these four fields (types/message.ts, mface).
            return MessageSegment(
                "mface",
                {
                    "emoji_package_id": _number(segment.detail_value("emoji_package_id")),
                    "emoji_id": segment.detail_value("emoji_id"),
                    "key": segment.detail_value("key"),
                    "summary": segment.detail_value("summary") or segment.text,
                },
            )
        case SegmentKind.RECORD if segment.media is not None:
            return MessageSegment.record(segment.media.url or segment.media.file)
    raise UnsendableSegmentError(f"cannot send a {segment.kind} segment: {segment!r}")


def _number(value: str) -> int | str:
    return int(value) if value.isdigit() else value
