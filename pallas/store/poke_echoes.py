"""One row per poke of the bot's, whether its record or NapCat's report of it comes first.

A poke has no platform id, so its synthetic id carries a time: the bot's own clock when it
records the poke NapCat confirmed, NapCat's clock on the notice that reports it. The two
differ by a second or so, and a second boundary between them would make one poke two rows.
So a poke of the bot's takes the id of a poke of the bot's already stored (or earlier in
the same batch) with the same target in the same stream within ECHO_WINDOW; the insert then
meets that row and counts as a duplicate. The bot never pokes one person twice that fast
(poke back allows once a minute per person; the outbox paces everything it sends).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from pallas.core.inbound import InboundEvent, InboundMessage, poke_id
from pallas.store.models import Message

ECHO_WINDOW = timedelta(seconds=3)


def _is_own_poke(item: InboundEvent) -> bool:
    return isinstance(item, InboundMessage) and item.is_poke and item.from_bot


async def merge_own_poke_echoes(
    conn: AsyncConnection, items: Sequence[InboundEvent], streams: dict[Any, int]
) -> list[InboundEvent]:
    """`items` with each own poke renamed to the id of the same poke seen before, if any."""
    if not any(_is_own_poke(item) for item in items):
        return list(items)
    pokes = [item for item in items if isinstance(item, InboundMessage) and _is_own_poke(item)]
    seen = await _stored_pokes(conn, pokes, streams)
    merged: list[InboundEvent] = []
    for item in items:
        if isinstance(item, InboundMessage) and _is_own_poke(item):
            item = _renamed(item, streams[item.stream], seen)
        merged.append(item)
    return merged


def _renamed(
    poke: InboundMessage, stream_id: int, seen: list[tuple[int, str, str, datetime]]
) -> InboundMessage:
    target = poke.mentions[0] if poke.mentions else ""
    matches = [
        (abs(time - poke.time), pid)
        for sid, pid, tgt, time in seen
        if sid == stream_id and tgt == target and abs(time - poke.time) <= ECHO_WINDOW
    ]
    if matches:
        poke = replace(poke, platform_message_id=min(matches)[1])
    else:
        seen.append((stream_id, poke.platform_message_id, target, poke.time))
    return poke


async def _stored_pokes(
    conn: AsyncConnection, pokes: list[InboundMessage], streams: dict[Any, int]
) -> list[tuple[int, str, str, datetime]]:
    # The ids a stored poke of the same poker and target within the window would have:
    # exact look-ups on the (stream, platform id) key, however long the stream is.
    window = int(ECHO_WINDOW.total_seconds())
    candidates = {
        poke_id(poke.sender.user_id, target, second)
        for poke in pokes
        for target in poke.mentions[:1]
        for second in range(
            int(poke.time.timestamp()) - window, int(poke.time.timestamp()) + window + 1
        )
    }
    query = select(
        Message.stream_id, Message.platform_message_id, Message.mentions, Message.time
    ).where(
        Message.stream_id.in_({streams[poke.stream] for poke in pokes}),
        Message.platform_message_id.in_(candidates),
        Message.is_poke.is_(True),
        Message.from_bot.is_(True),
    )
    rows = (await conn.execute(query)).all()
    return [
        (row.stream_id, row.platform_message_id, str(row.mentions[0]), row.time)
        for row in rows
        if row.mentions
    ]
