"""What memory holds of the timeline, which the hourly clean-up keeps (docs/retention.md)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.memory.tables import MemoryConsent, MemoryEntry
from pallas.store.retention import Holds


async def memory_holds(engine: AsyncEngine) -> Holds:
    """Every memory entry's evidence (forgotten ones too: their undo shows it) and the
    message in which someone agreed to be remembered everywhere."""
    ids: set[int] = set()
    async with engine.connect() as conn:
        for sources in (await conn.execute(select(MemoryEntry.source_message_ids))).scalars():
            ids.update(int(i) for i in sources or ())
        consents = select(MemoryConsent.message_id).where(MemoryConsent.message_id.is_not(None))
        ids.update(int(i) for i in (await conn.execute(consents)).scalars())
    return Holds(message_ids=frozenset(ids))
