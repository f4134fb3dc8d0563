"""OneBot v11 message segments -> core segments, with bounded size."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pallas.core.inbound import MediaRef, Segment, SegmentKind

MAX_TEXT_CHARS = 20_000
MAX_SEGMENTS = 200
_CARD_TITLE_CHARS = 80

Data = Mapping[str, Any]


@dataclass(frozen=True)
class ConvertedSegments:
    segments: tuple[Segment, ...]
    truncated: bool
    unknown_types: tuple[str, ...]


def convert_segments(raw: Iterable[tuple[str, Data]]) -> ConvertedSegments:
    """Convert (type, data) pairs; text beyond MAX_TEXT_CHARS is cut and flagged."""
    out: list[Segment] = []
    unknown: list[str] = []
    budget = MAX_TEXT_CHARS
    truncated = False
    for seg_type, data in raw:
        if len(out) >= MAX_SEGMENTS or budget <= 0:
            truncated = True
            break
        converter = _CONVERTERS.get(seg_type)
        if converter is None:
            unknown.append(seg_type)
            segment = Segment(SegmentKind.OTHER, text=f"[{seg_type}]", raw_type=seg_type)
        else:
            segment = converter(data)
        if len(segment.text) > budget:
            segment = _cut(segment, budget)
            truncated = True
        budget -= len(segment.text)
        out.append(segment)
    return ConvertedSegments(tuple(out), truncated, tuple(unknown))


def _cut(segment: Segment, budget: int) -> Segment:
    return Segment(
        segment.kind, segment.text[:budget], segment.target, segment.media, segment.raw_type
    )


def _s(data: Data, key: str) -> str:
    value = data.get(key)
    return "" if value is None else str(value)


def _media(data: Data) -> MediaRef:
    size = data.get("file_size") or data.get("size")
    try:
        size_int = int(size) if size not in (None, "") else None
    except (TypeError, ValueError):
        size_int = None
    return MediaRef(
        file=_s(data, "file_id") or _s(data, "file"),
        url=_s(data, "url"),
        name=_s(data, "name") or _s(data, "file"),
        size=size_int,
    )


def _text(data: Data) -> Segment:
    return Segment(SegmentKind.TEXT, text=_s(data, "text"))


def _at(data: Data) -> Segment:
    qq = _s(data, "qq")
    if qq == "all":
        return Segment(SegmentKind.AT_ALL, text="@全体成员")
    return Segment(SegmentKind.AT, text=f"@{_s(data, 'name') or qq}", target=qq)


def _reply(data: Data) -> Segment:
    return Segment(SegmentKind.REPLY, target=_s(data, "id"))


def _face(data: Data) -> Segment:
    label = _s(data, "faceText") or _s(data, "text")
    return Segment(
        SegmentKind.FACE, text=f"[表情{label}]" if label else "[表情]", target=_s(data, "id")
    )


def _image(data: Data) -> Segment:
    summary = _s(data, "summary").strip()
    sticker = str(data.get("sub_type", "0")) == "1" or summary == "[动画表情]"
    label = "[动画表情]" if sticker else "[图片]"
    return Segment(SegmentKind.IMAGE, text=label, media=_media(data), raw_type="image")


def _market_face(data: Data) -> Segment:
    summary = _s(data, "summary").strip("[]") or "表情包"
    return Segment(
        SegmentKind.IMAGE, text=f"[表情包:{summary}]", media=_media(data), raw_type="mface"
    )


def _media_segment(kind: SegmentKind, label: str) -> Callable[[Data], Segment]:
    def convert(data: Data) -> Segment:
        return Segment(kind, text=label, media=_media(data))

    return convert


def _file(data: Data) -> Segment:
    name = _s(data, "name") or _s(data, "file")
    return Segment(
        SegmentKind.FILE, text=f"[文件:{name}]" if name else "[文件]", media=_media(data)
    )


def _json_card(data: Data) -> Segment:
    title = ""
    try:
        card = json.loads(_s(data, "data"))
        title = str(card.get("prompt") or card.get("desc") or "") if isinstance(card, dict) else ""
    except (ValueError, TypeError):
        title = ""
    title = title.strip()[:_CARD_TITLE_CHARS]
    return Segment(SegmentKind.CARD, text=f"[卡片:{title}]" if title else "[卡片]", raw_type="json")


def _labelled(kind: SegmentKind, label: str, title_key: str = "") -> Callable[[Data], Segment]:
    def convert(data: Data) -> Segment:
        title = _s(data, title_key).strip()[:_CARD_TITLE_CHARS] if title_key else ""
        return Segment(kind, text=f"[{label}:{title}]" if title else f"[{label}]", raw_type=label)

    return convert


def _forward(data: Data) -> Segment:
    return Segment(SegmentKind.FORWARD, text="[聊天记录]", target=_s(data, "id") or None)


def _markdown(data: Data) -> Segment:
    return Segment(SegmentKind.TEXT, text=_s(data, "content"), raw_type="markdown")


_CONVERTERS: dict[str, Callable[[Data], Segment]] = {
    "text": _text,
    "at": _at,
    "reply": _reply,
    "face": _face,
    "image": _image,
    "mface": _market_face,
    "record": _media_segment(SegmentKind.RECORD, "[语音]"),
    "video": _media_segment(SegmentKind.VIDEO, "[视频]"),
    "file": _file,
    "json": _json_card,
    "xml": _labelled(SegmentKind.CARD, "卡片"),
    "share": _labelled(SegmentKind.CARD, "分享", "title"),
    "music": _labelled(SegmentKind.CARD, "音乐"),
    "location": _labelled(SegmentKind.CARD, "位置", "title"),
    "contact": _labelled(SegmentKind.CARD, "名片"),
    "forward": _forward,
    "node": _forward,
    "markdown": _markdown,
    "dice": _labelled(SegmentKind.OTHER, "骰子"),
    "rps": _labelled(SegmentKind.OTHER, "猜拳"),
    "poke": _labelled(SegmentKind.OTHER, "戳一戳"),
    "shake": _labelled(SegmentKind.OTHER, "窗口抖动"),
}
