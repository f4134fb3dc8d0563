"""OneBot v11 message segments, as NapCat reports them -> core segments, with bounded size.

Each segment becomes what a member sees of it: a face's name, a market face's label, a
dice's result, a file's name, a forwarded conversation's first lines. The shapes follow
NapCat's converters (packages/napcat-onebot/api/msg.ts); docs/napcat.md lists them all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pallas.core.inbound import MediaRef, Segment, SegmentKind
from pallas.core.media import PICTURE_PLACEHOLDER, STICKER_PLACEHOLDER, VOICE_PLACEHOLDER
from pallas.platform.onebot.frames import UNREADABLE_SEGMENT

MAX_TEXT_CHARS = 20_000
MAX_SEGMENTS = 200
_TITLE_CHARS = 80
_FORWARD_LINES = 6  # lines of a forwarded conversation shown inline
_FORWARD_LINE_CHARS = 60
_FORWARD_DEPTH = 2  # a forward inside a forward inside a forward shows as its label only

# QQ's rock-paper-scissors face reports its outcome as 1..3.
_RPS_RESULTS = {"1": "布", "2": "剪刀", "3": "石头"}

Data = Mapping[str, Any]


@dataclass(frozen=True)
class ConvertedSegments:
    segments: tuple[Segment, ...]
    truncated: bool
    unknown_types: tuple[str, ...]


def convert_segments(raw: Iterable[tuple[str, Data]], depth: int = 0) -> ConvertedSegments:
    """Convert (type, data) pairs; text beyond MAX_TEXT_CHARS is cut and flagged."""
    out: list[Segment] = []
    unknown: list[str] = []
    budget = MAX_TEXT_CHARS
    truncated = False
    for seg_type, data in raw:
        if len(out) >= MAX_SEGMENTS or budget <= 0:
            truncated = True
            break
        segment = _convert_one(str(seg_type), data if isinstance(data, Mapping) else {}, depth)
        if segment is None:
            unknown.append(str(seg_type))
            segment = Segment(SegmentKind.OTHER, text=f"[{seg_type}]", raw_type=str(seg_type))
        if len(segment.text) > budget:
            segment = _cut(segment, budget)
            truncated = True
        budget -= len(segment.text)
        out.append(segment)
    return ConvertedSegments(tuple(out), truncated, tuple(unknown))


def _convert_one(seg_type: str, data: Data, depth: int) -> Segment | None:
    if seg_type == "forward":
        return _forward(data, depth)
    converter = _CONVERTERS.get(seg_type)
    return converter(data) if converter is not None else None


def _cut(segment: Segment, budget: int) -> Segment:
    return Segment(
        segment.kind,
        segment.text[:budget],
        segment.target,
        segment.media,
        segment.raw_type,
        segment.detail,
    )


def _s(data: Data, key: str) -> str:
    value = data.get(key)
    if value is None or isinstance(value, dict | list):
        return ""
    return str(value)


def _title(value: str) -> str:
    return " ".join(value.split())[:_TITLE_CHARS]


def _size(value: Any) -> int | None:
    """A byte count; None for anything that is not a finite, non-negative number."""
    if value in (None, "") or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number) or number < 0:
        return None
    return int(number)


def _media(data: Data) -> MediaRef:
    return MediaRef(
        file=_s(data, "file_id") or _s(data, "file"),
        url=_s(data, "url"),
        name=_s(data, "name") or _s(data, "file"),
        size=_size(data.get("file_size") or data.get("size")),
    )


def _text(data: Data) -> Segment:
    return Segment(SegmentKind.TEXT, text=_s(data, "text"))


def _at(data: Data) -> Segment:
    qq = _s(data, "qq")
    if qq == "all":
        return Segment(SegmentKind.AT_ALL, text="@全体成员")
    # NapCat sends no name: the id is kept, and names are shown where the prompt is built.
    return Segment(SegmentKind.AT, text=f"@{_s(data, 'name') or qq}", target=qq)


def _reply(data: Data) -> Segment:
    return Segment(SegmentKind.REPLY, target=_s(data, "id"))


def face_label(data: Data) -> str:
    """A face's name: NapCat nests the QQ element, with its `faceText`, under `raw`."""
    raw = data.get("raw")
    text = _s(raw, "faceText") if isinstance(raw, Mapping) else ""
    text = text or _s(data, "faceText") or _s(data, "text")
    return _title(text.strip().strip("[]").lstrip("/"))


def _face(data: Data) -> Segment:
    label = face_label(data)
    return Segment(
        SegmentKind.FACE, text=f"[表情:{label}]" if label else "[表情]", target=_s(data, "id")
    )


def _is_market_face(data: Data) -> bool:
    return bool(_s(data, "emoji_id") and _s(data, "key"))


def _image(data: Data) -> Segment:
    if _is_market_face(data):
        return _market_face(data)
    summary = _s(data, "summary").strip()
    sticker = _s(data, "sub_type") == "1" or summary == STICKER_PLACEHOLDER
    label = STICKER_PLACEHOLDER if sticker else PICTURE_PLACEHOLDER
    return Segment(SegmentKind.IMAGE, text=label, media=_media(data), raw_type="image")


def _market_face(data: Data) -> Segment:
    summary = _title(_s(data, "summary").strip().strip("[]")) or "表情包"
    detail = tuple(
        (key, _s(data, key))
        for key in ("emoji_id", "emoji_package_id", "key", "summary")
        if _s(data, key)
    )
    return Segment(
        SegmentKind.MARKET_FACE,
        text=f"[表情包:{summary}]",
        target=_s(data, "emoji_id"),
        media=_media(data),
        raw_type="mface",
        detail=detail,
    )


def _media_segment(kind: SegmentKind, label: str) -> Callable[[Data], Segment]:
    def convert(data: Data) -> Segment:
        return Segment(kind, text=label, media=_media(data))

    return convert


def _file(data: Data) -> Segment:
    name = _title(_s(data, "name") or _s(data, "file"))
    return Segment(
        SegmentKind.FILE, text=f"[文件:{name}]" if name else "[文件]", media=_media(data)
    )


def _online_file(data: Data) -> Segment:
    name = _title(_s(data, "fileName"))
    label = "在线文件夹" if data.get("isDir") is True else "在线文件"
    return Segment(
        SegmentKind.FILE,
        text=f"[{label}:{name}]" if name else f"[{label}]",
        media=MediaRef(name=name, size=_size(data.get("fileSize"))),
        raw_type="onlinefile",
        detail=tuple((k, _s(data, k)) for k in ("msgId", "elementId") if _s(data, k)),
    )


def _flash_transfer(data: Data) -> Segment:
    return Segment(
        SegmentKind.FILE,
        text="[闪传文件]",
        raw_type="flashtransfer",
        detail=(("fileSetId", _s(data, "fileSetId")),) if _s(data, "fileSetId") else (),
    )


def _card_title(raw: str) -> str:
    try:
        card = json.loads(raw)
    except (ValueError, RecursionError):
        return ""
    if not isinstance(card, dict):
        return ""
    return _title(str(card.get("prompt") or card.get("desc") or ""))


def _json_card(data: Data) -> Segment:
    payload = data.get("data")
    title = _card_title(payload) if isinstance(payload, str) else ""
    if isinstance(payload, Mapping):
        title = _title(_s(payload, "prompt") or _s(payload, "desc"))
    return Segment(SegmentKind.CARD, text=f"[卡片:{title}]" if title else "[卡片]", raw_type="json")


def _labelled(
    kind: SegmentKind, label: str, *title_keys: str, raw_type: str = ""
) -> Callable[[Data], Segment]:
    def convert(data: Data) -> Segment:
        title = next((_title(_s(data, key)) for key in title_keys if _s(data, key).strip()), "")
        return Segment(
            kind, text=f"[{label}:{title}]" if title else f"[{label}]", raw_type=raw_type or label
        )

    return convert


def _dice(data: Data) -> Segment:
    result = _title(_s(data, "result"))
    return Segment(
        SegmentKind.OTHER, text=f"[骰子:{result}]" if result else "[骰子]", raw_type="dice"
    )


def _rps(data: Data) -> Segment:
    result = _s(data, "result")
    shown = _RPS_RESULTS.get(result, _title(result))
    return Segment(SegmentKind.OTHER, text=f"[猜拳:{shown}]" if shown else "[猜拳]", raw_type="rps")


def _contact(data: Data) -> Segment:
    kind = "群" if _s(data, "type") == "group" else "QQ"
    who = _title(_s(data, "id"))
    return Segment(
        SegmentKind.CARD, text=f"[推荐{kind}:{who}]" if who else "[推荐联系人]", raw_type="contact"
    )


def _forward(data: Data, depth: int) -> Segment:
    content = data.get("content")
    summary = forward_summary(content, depth) if isinstance(content, list) else ""
    return Segment(
        SegmentKind.FORWARD,
        text=f"[聊天记录:{summary}]" if summary else "[聊天记录]",
        target=_s(data, "id") or None,
        raw_type="forward",
    )


def forward_summary(messages: list[Any], depth: int = 0) -> str:
    """The first lines of a forwarded conversation: "name: text / name: text …"."""
    if depth >= _FORWARD_DEPTH:
        return ""
    lines = []
    for message in messages[:_FORWARD_LINES]:
        if isinstance(message, Mapping):
            line = _forward_line(message, depth)
            if line:
                lines.append(line)
    more = " …" if len(messages) > _FORWARD_LINES else ""
    return " / ".join(lines) + more


def _forward_line(message: Data, depth: int) -> str:
    sender = message.get("sender")
    sender = sender if isinstance(sender, Mapping) else {}
    name = _title(_s(sender, "card") or _s(sender, "nickname") or _s(message, "user_id"))
    body = message.get("message", message.get("content"))
    if isinstance(body, str):
        text = body
    elif isinstance(body, list):
        pairs = [
            (str(seg.get("type", "")), seg.get("data") or {})
            for seg in body
            if isinstance(seg, Mapping)
        ]
        converted = convert_segments(pairs, depth + 1).segments
        text = "".join(seg.text for seg in converted if seg.kind is not SegmentKind.REPLY)
    else:
        text = ""
    text = " ".join(text.split())
    if len(text) > _FORWARD_LINE_CHARS:
        text = text[:_FORWARD_LINE_CHARS] + "…"
    return f"{name}: {text}" if name else text


def _markdown(data: Data) -> Segment:
    return Segment(SegmentKind.TEXT, text=_s(data, "content"), raw_type="markdown")


def _unreadable(data: Data) -> Segment:
    return Segment(SegmentKind.OTHER, text="[无法读取的内容]", raw_type="unreadable")


_CONVERTERS: dict[str, Callable[[Data], Segment]] = {
    "text": _text,
    "at": _at,
    "reply": _reply,
    "face": _face,
    "image": _image,
    "mface": _market_face,
    "record": _media_segment(SegmentKind.RECORD, VOICE_PLACEHOLDER),
    "video": _media_segment(SegmentKind.VIDEO, "[视频]"),
    "file": _file,
    "onlinefile": _online_file,
    "flashtransfer": _flash_transfer,
    "json": _json_card,
    "miniapp": _labelled(SegmentKind.CARD, "小程序", raw_type="miniapp"),
    "xml": _labelled(SegmentKind.CARD, "卡片", raw_type="xml"),
    "share": _labelled(SegmentKind.CARD, "分享", "title"),
    "music": _labelled(SegmentKind.CARD, "音乐", "title", raw_type="music"),
    "location": _labelled(SegmentKind.CARD, "位置", "title", "content"),
    "contact": _contact,
    "node": _labelled(SegmentKind.FORWARD, "聊天记录", raw_type="node"),
    "markdown": _markdown,
    "dice": _dice,
    "rps": _rps,
    "poke": _labelled(SegmentKind.OTHER, "戳一戳"),
    "shake": _labelled(SegmentKind.OTHER, "窗口抖动"),
    UNREADABLE_SEGMENT: _unreadable,
}
