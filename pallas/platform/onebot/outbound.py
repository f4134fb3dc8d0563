"""Core segments -> OneBot v11 segment arrays. Text is never parsed as CQ code."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path

from nonebot.adapters.onebot.v11 import Message, MessageSegment

from pallas.core.assets import asset_file, asset_path
from pallas.core.inbound import Segment, SegmentKind
from pallas.core.media import STICKER_PLACEHOLDER, is_sticker_text


class UnsendableSegmentError(ValueError):
    """A segment kind the bot does not send."""


def to_onebot_message(segments: Iterable[Segment]) -> Message:
    """Build the outgoing message segment by segment (never from a string)."""
    message = Message()
    for segment in segments:
        message.append(_to_onebot_segment(segment))
    return message


def inline_assets(segments: Sequence[Segment], folder: Path | None) -> tuple[Segment, ...]:
    """Asset references replaced by the file's bytes (`base64://`): NapCat often runs on
    another machine or container, where a path of ours means nothing."""
    return tuple(_inline(segment, folder) for segment in segments)


def _inline(segment: Segment, folder: Path | None) -> Segment:
    media = segment.media
    relative = asset_path(media.file) if media is not None and not media.url else None
    if media is None or relative is None:
        return segment
    if folder is None:
        raise UnsendableSegmentError(f"asset {relative!r}: this outlet has no assets folder")
    try:
        data = asset_file(folder, relative).read_bytes()
    except OSError as exc:
        raise UnsendableSegmentError(f"asset {relative!r} cannot be read: {exc}") from exc
    encoded = "base64://" + base64.b64encode(data).decode("ascii")
    return dataclasses.replace(segment, media=dataclasses.replace(media, url=encoded))


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
            return _image(segment, segment.media.url or segment.media.file)
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
        case SegmentKind.VIDEO if segment.media is not None:
            return MessageSegment.video(segment.media.url or segment.media.file)
    raise UnsendableSegmentError(f"cannot send a {segment.kind} segment: {segment!r}")


def _image(segment: Segment, file: str) -> MessageSegment:
    """A picture; one marked as a sticker goes out as one (NapCat's image `sub_type` 1 and
    summary), so QQ shows it small and NapCat's echo of it reads as a sticker."""
    if not is_sticker_text(segment.text):
        return MessageSegment.image(file)
    return MessageSegment("image", {"file": file, "sub_type": 1, "summary": STICKER_PLACEHOLDER})


def _number(value: str) -> int | str:
    return int(value) if value.isdigit() else value
