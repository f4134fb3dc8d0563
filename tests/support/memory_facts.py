"""Memory's tests' shared set-up: someone who spoke in a group, and a fact kept about them
through the real store."""

from __future__ import annotations

from datetime import datetime

from pallas.product.memory.store import MemoryKind, MemoryStore, NewMemory
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import group, message


async def speaker(writer: TimelineWriter, user_id: str, room: str) -> MessageWritten:
    """`user_id` said something in group `room`: their person and the chat now exist."""
    written = await writer.write(message("在吗", stream=group(room), user_id=user_id))
    assert isinstance(written, MessageWritten)
    return written


async def kept_fact(store: MemoryStore, who: MessageWritten, text: str, now: datetime) -> int:
    """A fact about `who` in their chat, as the extraction job keeps it; its entry id."""
    new = NewMemory(MemoryKind.FACT, who.stream_id, who.person_id, text, "extraction")
    [done] = await store.remember([new], now, actor="job:1")
    return done.entry_id
