"""Plain-text helpers shared by every layer."""

from __future__ import annotations

from collections.abc import Iterable

from pallas.core.inbound import InboundEvent, InboundMessage, Segment, SegmentKind


def excerpt(text: str, limit: int = 120) -> str:
    """A one-line, bounded rendering of untrusted text for log lines.

    A lone surrogate (a broken emoji) is shown escaped: no log sink can encode one.
    """
    flat = " ".join(str(text).split()).encode("utf-8", "backslashreplace").decode("utf-8")
    if len(flat) <= limit:
        return flat
    return f"{flat[:limit]}… ({len(text)} chars)"


def render_plain_text(segments: Iterable[Segment]) -> str:
    """The timeline's text: segment renderings joined; replies are carried separately."""
    return "".join(seg.text for seg in segments if seg.kind is not SegmentKind.REPLY)


def typed_text(segments: Iterable[Segment]) -> str:
    """What the sender typed: text segments only (no @, quote, picture placeholder)."""
    return "".join(s.text for s in segments if s.kind is SegmentKind.TEXT)


def describe_inbound(item: InboundEvent) -> str:
    """A short, log-safe description of an inbound fact."""
    stream = f"{item.stream.kind}:{item.stream.external_id}"
    if isinstance(item, InboundMessage):
        return (
            f"{stream} msg {item.platform_message_id} from {item.sender.user_id}: "
            f"{excerpt(item.text, 60)}"
        )
    return f"{stream} {type(item).__name__}"
