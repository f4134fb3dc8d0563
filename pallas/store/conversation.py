"""What the conversation agent reads: a stream's recent window, older matches, one message.

Every read is bounded by a message id (the turn's watermark), so what the model sees does not
depend on what arrived while the turn was being prepared.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, Select, and_, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKey, StreamKind
from pallas.store.identities import stream_where
from pallas.store.models import Identity, Member, Message, Person, Stream

_LIKE_ESCAPE = "\\"


@dataclass(frozen=True)
class WindowLine:
    message_id: int
    platform_message_id: str
    sender_person_id: int
    speaker: str  # the card in this group, else the latest nickname; empty when never seen
    user_id: str  # the sender's platform id
    from_bot: bool
    text: str
    time: datetime
    reply_to: str | None  # platform id of the quoted message
    is_poke: bool
    recalled: bool
    role: str = ""  # owner / admin / member in this group, when known
    mentions: tuple[str, ...] = ()  # platform ids @-mentioned
    suppressed: bool = False  # silenced: stored, but nobody acts on it (nor learns from it)
    origin: str = ""  # the bot's own line: which part of it said it (pallas.core.actions.Origin)


@dataclass(frozen=True)
class StreamInfo:
    stream_id: int
    kind: str
    external_id: str
    self_id: str
    name: str


def _line_query() -> Select[Any]:
    # One identity per person names the account; the first seen (lowest id), looked up per
    # row through the person_id index rather than by grouping the whole identity table.
    user_id = (
        select(Identity.user_id)
        .where(Identity.person_id == Message.sender_person_id)
        .order_by(Identity.id)
        .limit(1)
        .correlate(Message)
        .scalar_subquery()
    )
    return (
        select(
            Message.id,
            Message.platform_message_id,
            Message.sender_person_id,
            Person.display_name,
            Member.card,
            Member.role,
            user_id.label("user_id"),
            Message.from_bot,
            Message.text,
            Message.time,
            Message.reply_to,
            Message.is_poke,
            Message.recalled,
            Message.mentions,
            Message.suppressed,
            Message.origin,
        )
        .join(Person, Person.id == Message.sender_person_id)
        .outerjoin(
            Member,
            and_(
                Member.stream_id == Message.stream_id,
                Member.person_id == Message.sender_person_id,
            ),
        )
    )


async def window_up_to(
    engine: AsyncEngine, stream_id: int, watermark: int, limit: int
) -> list[WindowLine]:
    """The `limit` newest messages with id <= watermark, oldest first."""
    query = (
        _line_query()
        .where(Message.stream_id == stream_id, Message.id <= watermark)
        .order_by(Message.id.desc())
        .limit(limit)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [_line(row) for row in reversed(rows)]


async def lines_by_ids(
    engine: AsyncEngine, stream_id: int, ids: Sequence[int]
) -> list[WindowLine]:
    """The stream's messages with these ids (those still stored), oldest first."""
    if not ids:
        return []
    query = _line_query().where(Message.stream_id == stream_id, Message.id.in_(list(ids)))
    async with engine.connect() as conn:
        rows = (await conn.execute(query.order_by(Message.id))).all()
    return [_line(row) for row in rows]


async def lines_since(
    engine: AsyncEngine, stream_id: int, since: datetime, ids: tuple[int, int], limit: int
) -> list[WindowLine]:
    """The `limit` newest messages sent at or after `since` with an id in (after, up to],
    oldest first (a summary's window)."""
    after, up_to = ids
    query = (
        _line_query()
        .where(
            Message.stream_id == stream_id,
            Message.time >= since,
            Message.id > after,
            Message.id <= up_to,
        )
        .order_by(Message.id.desc())
        .limit(limit)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [_line(row) for row in reversed(rows)]


async def last_said_by(
    engine: AsyncEngine, stream_id: int, person_id: int, before_id: int
) -> int | None:
    """The id of the person's latest message in the stream before `before_id`."""
    query = select(func.max(Message.id)).where(
        Message.stream_id == stream_id,
        Message.sender_person_id == person_id,
        Message.id < before_id,
    )
    async with engine.connect() as conn:
        found = (await conn.execute(query)).scalar()
    return None if found is None else int(found)


async def search_before(
    engine: AsyncEngine, stream_id: int, before: int, words: list[str], limit: int
) -> list[WindowLine]:
    """Older messages of the stream containing every word, newest first."""
    query = _line_query().where(Message.stream_id == stream_id, Message.id < before)
    for word in words:
        escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = query.where(Message.text.like(f"%{escaped}%", escape=_LIKE_ESCAPE))
    async with engine.connect() as conn:
        rows = (await conn.execute(query.order_by(Message.id.desc()).limit(limit))).all()
    return [_line(row) for row in rows]


async def around(
    engine: AsyncEngine, stream_id: int, message_id: int, watermark: int, span: int
) -> list[WindowLine]:
    """The message with up to `span` neighbours on each side (none after the watermark)."""
    before = (
        _line_query()
        .where(Message.stream_id == stream_id, Message.id <= message_id)
        .order_by(Message.id.desc())
        .limit(span + 1)
    )
    after = (
        _line_query()
        .where(
            Message.stream_id == stream_id,
            Message.id > message_id,
            Message.id <= watermark,
        )
        .order_by(Message.id)
        .limit(span)
    )
    async with engine.connect() as conn:
        older = (await conn.execute(before)).all()
        newer = (await conn.execute(after)).all()
    if not older or older[0].id != message_id:
        return []
    return [_line(row) for row in [*reversed(older), *newer]]


async def newest_message_id(engine: AsyncEngine, stream_id: int) -> int:
    query = select(func.max(Message.id)).where(Message.stream_id == stream_id)
    async with engine.connect() as conn:
        return int((await conn.execute(query)).scalar() or 0)


async def newest_before(engine: AsyncEngine, stream_id: int, at: datetime) -> int:
    """The newest message id of the stream sent at or before `at` (0: none)."""
    query = select(func.max(Message.id)).where(Message.stream_id == stream_id,
                                               Message.time <= at)  # fmt: skip
    async with engine.connect() as conn:
        return int((await conn.execute(query)).scalar() or 0)


async def stream_info(engine: AsyncEngine, stream_id: int) -> StreamInfo | None:
    query = select(Stream.kind, Stream.external_id, Stream.self_id, Stream.name).where(
        Stream.id == stream_id
    )
    async with engine.connect() as conn:
        row = (await conn.execute(query)).first()
    if row is None:
        return None
    return StreamInfo(stream_id, row.kind, row.external_id, row.self_id, row.name)


async def stream_key(engine: AsyncEngine, stream_id: int) -> StreamKey | None:
    """The stream as the platform names it (a turn the bot starts has no message to tell)."""
    query = select(Stream.platform, Stream.self_id, Stream.kind, Stream.external_id).where(
        Stream.id == stream_id
    )
    async with engine.connect() as conn:
        row = (await conn.execute(query)).first()
    if row is None:
        return None
    return StreamKey(row.platform, row.self_id, StreamKind(row.kind), row.external_id)


async def names_in_stream(
    engine: AsyncEngine, stream_id: int, user_ids: Collection[str]
) -> dict[str, str]:
    """Platform id -> the name shown in this stream (the group card, else the nickname)."""
    if not user_ids:
        return {}
    query = (
        select(Identity.user_id, Person.display_name, Member.card)
        .join(Person, Person.id == Identity.person_id)
        .outerjoin(
            Member, and_(Member.stream_id == stream_id, Member.person_id == Identity.person_id)
        )
        .where(Identity.user_id.in_(set(user_ids)))
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return {row.user_id: name for row in rows if (name := row.card or row.display_name)}


def _line(row: Row[Any]) -> WindowLine:
    return WindowLine(
        message_id=row.id,
        platform_message_id=row.platform_message_id,
        sender_person_id=row.sender_person_id,
        speaker=row.card or row.display_name or "",
        user_id=row.user_id or "",
        from_bot=row.from_bot,
        text=row.text,
        time=row.time,
        reply_to=row.reply_to,
        is_poke=row.is_poke,
        recalled=row.recalled,
        role=row.role or "",
        mentions=tuple(str(m) for m in row.mentions or ()),
        suppressed=bool(row.suppressed),
        origin=row.origin or "",
    )


async def chat_of(
    engine: AsyncEngine, platform: str, self_id: str, kind: str, external_id: str
) -> int | None:
    """A chat of the account: a group by its number (every account's), a private chat by
    the other's id."""
    query = select(Stream.id).where(*stream_where(platform, self_id, kind, external_id))
    async with engine.connect() as conn:
        return await conn.scalar(query)
