"""Plain-text helpers shared by every layer."""

from __future__ import annotations

from collections.abc import Iterable

from pallas.core.inbound import Segment, SegmentKind


def excerpt(text: str, limit: int = 120) -> str:
    """A one-line, bounded rendering of untrusted text for log lines."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    return f"{flat[:limit]}… ({len(text)} chars)"


def render_plain_text(segments: Iterable[Segment]) -> str:
    """The timeline's text: segment renderings joined; replies are carried separately."""
    return "".join(seg.text for seg in segments if seg.kind is not SegmentKind.REPLY)
