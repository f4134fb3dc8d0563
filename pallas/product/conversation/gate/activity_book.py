"""The per-stream activity views the gate reads, kept warm in memory (bounded).

A cache, never the truth: each view is loaded from the store on first sight after a start.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import counts_as_speaking
from pallas.product.conversation.gate.activity import HORIZON, Sighting, StreamActivity
from pallas.store import kernel_state
from pallas.store.sql import BoundedCache


class ActivityBook:
    """Per-stream activity views, loaded from the store on first sight, bounded in number."""

    def __init__(self, engine: AsyncEngine, capacity: int = 2_000) -> None:
        self._engine = engine
        self._views: BoundedCache[int, StreamActivity] = BoundedCache(capacity)
        # One load per stream at a time: a burst into a cold stream waits for the first load
        # instead of each message loading (and replacing) a view of its own.
        self._loading: dict[int, asyncio.Future[StreamActivity]] = {}

    async def get(self, stream_id: int, self_id: str, now: datetime) -> StreamActivity:
        view = self._views.get(stream_id)
        if view is not None:
            return view
        loading = self._loading.get(stream_id)
        if loading is None:
            loading = asyncio.ensure_future(self._load_and_keep(stream_id, self_id, now))
            self._loading[stream_id] = loading
        return await asyncio.shield(loading)

    async def _load_and_keep(self, stream_id: int, self_id: str, now: datetime) -> StreamActivity:
        try:
            view = await self._load(stream_id, self_id, now)
            self._views.put_all({stream_id: view})
            return view
        finally:
            del self._loading[stream_id]

    async def _load(self, stream_id: int, self_id: str, now: datetime) -> StreamActivity:
        since = now - HORIZON
        rows = await kernel_state.recent_rows(self._engine, stream_id, since)
        bot_ids = {r.platform_message_id for r in rows if r.from_bot}
        sightings = [
            Sighting(
                r.message_id,
                r.platform_message_id,
                r.person_id,
                r.stored_at,
                from_bot=r.from_bot,
                mentioned_me=self_id in r.mentions and not r.is_poke,
                poked_me=r.is_poke and self_id in r.mentions,
                replied_to_me=r.reply_to in bot_ids,
                speaking=counts_as_speaking(r.origin),
            )
            for r in rows
        ]
        return StreamActivity(
            sightings,
            await kernel_state.ambient_passes(self._engine, stream_id, since),
            await kernel_state.follow_up_declined(self._engine, stream_id),
        )
