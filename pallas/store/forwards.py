"""A forwarded conversation's content, filled in after the message that carried it.

NapCat reports a forward by id only unless told to parse it; its first lines are fetched
off the ingress path and written here into the stored message, so the model reads them.
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from pallas.core.inbound import ForwardContent, Segment, SegmentKind
from pallas.core.text import render_plain_text
from pallas.store.models import Message


async def fill_in_forward(
    conn: AsyncConnection, stream_id: int, content: ForwardContent
) -> int | None:
    """Put the summary into the message's forward segment; the message's id, if stored."""
    row = (
        await conn.execute(
            select(Message.id, Message.segments).where(
                Message.stream_id == stream_id,
                Message.platform_message_id == content.platform_message_id,
            )
        )
    ).first()
    if row is None:
        return None
    segments = [Segment.from_json(seg) for seg in row.segments]
    filled = [_filled(seg, content) for seg in segments]
    if filled != segments:
        await conn.execute(
            update(Message)
            .where(Message.id == row.id)
            .values(segments=[seg.to_json() for seg in filled], text=render_plain_text(filled))
        )
    return int(row.id)


def _filled(segment: Segment, content: ForwardContent) -> Segment:
    if segment.kind is not SegmentKind.FORWARD or segment.target != content.forward_id:
        return segment
    return Segment(
        SegmentKind.FORWARD,
        text=f"[聊天记录:{content.summary}]",
        target=segment.target,
        raw_type=segment.raw_type,
        detail=segment.detail,
    )
