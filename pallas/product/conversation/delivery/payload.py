"""The typed payload of an outbox message row, checked when it is queued.

A message is a list of core segments: text, @, @all, a quote, a QQ face, a shop sticker, and
image / voice / video given by an asset reference (`asset:<path under PALLAS_DATA_DIR/assets>`)
or by a URL (`http(s)://`, `base64://`). Anything else is refused here, before a row exists,
so a bad payload never sits in the outbox waiting to fail. The outlet translates the stored
segments to OneBot segments at send time.

Stored form: {"segments": [...Segment.to_json()], "text": plain text, "pause_s": float,
"quote": platform id, "marks": {...}}. `text` is what NapCat's echo of the sent message reads
as, what an echo or the platform's history is matched by after a crash; `marks` are facts for
receipt listeners (a sticker's hash), optional.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pallas.core.actions import ChatAction, Poke, Reaction, is_platform_id, reaction_id
from pallas.core.assets import asset_file, asset_path
from pallas.core.inbound import Segment, SegmentKind
from pallas.core.media import placeholder_of
from pallas.core.text import render_plain_text

MEDIA_KINDS = frozenset({SegmentKind.IMAGE, SegmentKind.RECORD, SegmentKind.VIDEO})
URL_SCHEMES = ("http://", "https://", "base64://")
SENDABLE = frozenset(
    {
        SegmentKind.TEXT,
        SegmentKind.AT,
        SegmentKind.AT_ALL,
        SegmentKind.REPLY,
        SegmentKind.FACE,
        SegmentKind.MARKET_FACE,
        *MEDIA_KINDS,
    }
)

# Whether an asset (a path relative to the assets folder) exists; passed in by the caller.
AssetExists = Callable[[str], bool]


class PayloadError(ValueError):
    """A message the outbox refuses to queue; the text says which segment and why."""


def message_payload(
    segments: Sequence[Segment],
    asset_exists: AssetExists,
    *,
    pause_s: float = 0.0,
    quote: str | None = None,
) -> dict[str, Any]:
    """The stored payload of one message, or PayloadError naming the first problem."""
    if not segments:
        raise PayloadError("an empty message cannot be sent")
    for index, segment in enumerate(segments):
        problem = segment_problem(segment, asset_exists)
        if problem is not None:
            raise PayloadError(f"segment {index} ({segment.kind.value}): {problem}")
    payload: dict[str, Any] = {
        "segments": [segment.to_json() for segment in segments],
        "text": platform_text(segments),
        "pause_s": pause_s,
    }
    if quote is not None:
        payload["quote"] = quote
    return payload


def platform_text(segments: Sequence[Segment]) -> str:
    """The text NapCat's echo of the message will have: a picture or voice shows as its bare
    placeholder there, whatever caption the bot gave it (matched after a lost receipt)."""
    return render_plain_text(
        replace(s, text=placeholder_of(s.text)) if s.kind in MEDIA_KINDS else s for s in segments
    )


def segment_problem(segment: Segment, asset_exists: AssetExists) -> str | None:
    """Why this segment cannot be sent, or None."""
    if segment.kind not in SENDABLE:
        return f"unknown segment type {segment.kind.value!r} for sending"
    if segment.kind is SegmentKind.TEXT:
        return None if segment.text else "empty text"
    if segment.kind in (SegmentKind.AT, SegmentKind.REPLY, SegmentKind.FACE):
        return None if is_platform_id(segment.target) else f"target {segment.target!r} is not an id"
    if segment.kind is SegmentKind.MARKET_FACE:
        return None if segment.detail_value("key") else "a shop sticker needs its key"
    if segment.kind in MEDIA_KINDS:
        return _media_problem(segment, asset_exists)
    return None


def no_assets(relative: str) -> bool:
    return False


def check_action(action: ChatAction) -> None:
    """A poke names a user id; a reaction a message id and a reaction from the vocabulary."""
    if isinstance(action, Poke):
        if not is_platform_id(action.user_id):
            raise PayloadError(f"a poke needs a user id, not {action.user_id!r}")
        return
    if isinstance(action, Reaction):
        if not is_platform_id(action.message_id):
            raise PayloadError(f"a reaction needs a message id, not {action.message_id!r}")
        if reaction_id(action.emoji) is None:
            raise PayloadError(f"unknown reaction {action.emoji!r}")
        return
    raise PayloadError(f"unknown outbox action {action!r}")


def asset_checker(folder: Path) -> AssetExists:
    """Whether an asset exists as a file in `folder` (PALLAS_DATA_DIR/assets)."""
    return lambda relative: asset_file(folder, relative).is_file()


def segments_of(payload: dict[str, Any]) -> tuple[Segment, ...]:
    """The segments of a stored message row (rows from before typed payloads hold text)."""
    stored = payload.get("segments")
    if isinstance(stored, list):
        return tuple(Segment.from_json(item) for item in stored)
    return (Segment(SegmentKind.TEXT, text=str(payload.get("text", ""))),)


def payload_text(payload: dict[str, Any]) -> str:
    return str(payload.get("text", ""))


def _media_problem(segment: Segment, asset_exists: AssetExists) -> str | None:
    media = segment.media
    if media is None or not (media.url or media.file):
        return "needs an asset reference or a URL"
    if media.url:
        return None if media.url.startswith(URL_SCHEMES) else f"unsupported URL {media.url!r}"
    relative = asset_path(media.file)
    if relative is None:
        return f"{media.file!r} is not an asset reference (asset:<path>) or a URL"
    return None if asset_exists(relative) else f"missing asset {relative!r}"
