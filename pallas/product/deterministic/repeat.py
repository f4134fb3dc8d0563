"""Repeat: when two different people say the same thing in a row, say it once more.

The decision reads only the timeline, so it is the same after a restart: the bot repeats at
the message that brings a run of identical content to its second distinct sender, and at
no other message of that run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pallas.core.inbound import Segment, SegmentKind

# How many of the newest messages the caller should pass in.
REPEAT_WINDOW = 20

# What the bot echoes back. Not @-mentions: repeating one would ping someone on another
# member's behalf (and @all never); not cards, files or voice: they do not resend cleanly.
_REPEATABLE = frozenset(
    {SegmentKind.TEXT, SegmentKind.FACE, SegmentKind.IMAGE, SegmentKind.MARKET_FACE}
)

ContentKey = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class RecentLine:
    """One timeline message, as much as the repeat decision needs."""

    sender_person_id: int
    from_bot: bool
    text: str
    segments: tuple[Segment, ...]
    is_poke: bool = False
    recalled: bool = False
    suppressed: bool = False  # silenced by rage: recorded, but nothing may answer it


@dataclass(frozen=True)
class Repeat:
    segments: tuple[Segment, ...]
    text: str


def decide_repeat(recent: Sequence[RecentLine]) -> Repeat | None:
    """`recent`: the stream's newest messages, oldest first, ending with the one to judge."""
    if not recent:
        return None
    newest = recent[-1]
    key = content_key(newest)
    if key is None or newest.from_bot or newest.suppressed or not _resendable(newest):
        return None
    lines = [line for line in recent if content_key(line) is not None]
    run = _trailing_run(lines, key)
    if any(line.from_bot for line in run):
        return None  # the bot already said it, or started it
    if len(run) == len(lines) and len(recent) >= REPEAT_WINDOW:
        return None  # the run may start before the window: it may have been repeated already
    earlier = {line.sender_person_id for line in run[:-1]}
    if len(earlier) != 1 or newest.sender_person_id in earlier:
        return None
    return Repeat(_outgoing(newest), newest.text)


def content_key(line: RecentLine) -> ContentKey | None:
    """What "the same content" means; None for lines that neither count nor break a run."""
    if line.recalled:
        return None
    return segments_key(line.text, line.segments, is_poke=line.is_poke)


def segments_key(text: str, segments: Sequence[Segment], *, is_poke: bool) -> ContentKey | None:
    """`content_key` of a line not recalled, from its parts (no line built on the hot path)."""
    stripped = text.strip()
    if is_poke or not stripped:
        return None
    kinds = tuple(
        (seg.kind.value, _identity(seg)) for seg in segments if seg.kind is not SegmentKind.REPLY
    )
    return stripped, kinds


def _identity(segment: Segment) -> str:
    """Two images share a label ("[图片]"); the file tells stickers apart."""
    if segment.kind is SegmentKind.IMAGE and segment.media is not None:
        return segment.media.file
    if segment.kind in (SegmentKind.FACE, SegmentKind.AT, SegmentKind.MARKET_FACE):
        return segment.target or ""
    return ""


def _trailing_run(lines: Sequence[RecentLine], key: ContentKey) -> list[RecentLine]:
    start = len(lines)
    while start > 0 and content_key(lines[start - 1]) == key:
        start -= 1
    return list(lines[start:])


def _outgoing(line: RecentLine) -> tuple[Segment, ...]:
    # A quote of someone else's message is theirs, not part of what is repeated.
    return tuple(seg for seg in line.segments if seg.kind is not SegmentKind.REPLY)


def _resendable(line: RecentLine) -> bool:
    parts = _outgoing(line)
    return bool(parts) and all(
        seg.kind in _REPEATABLE
        and (seg.kind is not SegmentKind.IMAGE or _has_source(seg))
        and (seg.kind is not SegmentKind.FACE or bool(seg.target))
        and (seg.kind is not SegmentKind.MARKET_FACE or bool(seg.detail_value("key")))
        for seg in parts
    )


def _has_source(segment: Segment) -> bool:
    # The outbox sends media by URL (or the bot's own assets); a bare platform file name
    # is not something it can send again.
    return segment.media is not None and bool(segment.media.url)
