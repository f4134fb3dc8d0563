"""What the console reads that no turn needs: chats, a chat's lines with the turns behind
the bot's, people and what the bot keeps about them, activity by hour, recent jobs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.audit import EventKind
from pallas.store.models import (
    Event,
    Identity,
    Job,
    LlmCall,
    Message,
    OutboxItem,
    Person,
    Stream,
    StreamAccount,
)

MAX_ACTIVITY_ROWS = 100_000  # a day of a busy bot; beyond it the chart says "at least"


@dataclass(frozen=True)
class ChatRow:
    stream_id: int
    platform: str  # qq, or sandbox (the console's own chats)
    kind: str
    external_id: str
    self_id: str
    name: str
    messages: int
    last_at: datetime | None
    # A group: the bot's accounts in it now (several accounts: docs/accounts.md).
    accounts: tuple[str, ...] = ()


@dataclass(frozen=True)
class LineRow:
    message_id: int
    time: datetime
    speaker: str
    user_id: str
    from_bot: bool
    text: str
    suppressed: bool
    turn_id: int | None  # the turn that took it; for the bot's lines, the turn that sent it
    dropped: bool = False  # the gate let it go: the chat page asks "why not?" of these only


@dataclass(frozen=True)
class PersonRow:
    person_id: int
    name: str
    user_ids: tuple[str, ...]


async def chats(engine: AsyncEngine) -> list[ChatRow]:
    counts = (
        select(
            Message.stream_id,
            func.count().label("n"),
            func.max(Message.time).label("last_at"),
        )
        .group_by(Message.stream_id)
        .subquery()
    )
    query = (
        select(Stream.id, Stream.platform, Stream.kind, Stream.external_id, Stream.self_id,
               Stream.name, func.coalesce(counts.c.n, 0), counts.c.last_at)
        .outerjoin(counts, counts.c.stream_id == Stream.id)
        .order_by(counts.c.last_at.desc().nulls_last(), Stream.id)
    )  # fmt: skip
    present = select(StreamAccount.stream_id, StreamAccount.self_id).where(
        StreamAccount.left_at.is_(None)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
        accounts: dict[int, list[str]] = {}
        for sid, account in await conn.execute(present):
            accounts.setdefault(sid, []).append(account)
    return [ChatRow(*row, accounts=tuple(sorted(accounts.get(row[0], ())))) for row in rows]


async def chat_lines(
    engine: AsyncEngine, stream_id: int, before_id: int | None, limit: int
) -> list[LineRow]:
    """The chat's newest lines before `before_id`, oldest first."""
    sent_by = (
        select(OutboxItem.turn_id)
        .where(
            OutboxItem.stream_id == Message.stream_id,
            OutboxItem.platform_message_id == Message.platform_message_id,
        )
        .limit(1)
        .scalar_subquery()
    )
    account = (  # a person's first identity names them (as the agent's window does)
        select(Identity.user_id)
        .where(Identity.person_id == Message.sender_person_id)
        .order_by(Identity.id)
        .limit(1)
        .scalar_subquery()
    )
    dropped = (
        select(Event.id)
        .where(Event.message_id == Message.id, Event.kind == EventKind.GATE_DROPPED.value)
        .exists()
    )
    query = (
        select(Message.id, Message.time, Person.display_name, account, Message.from_bot,
               Message.text, Message.suppressed, func.coalesce(Message.turn_id, sent_by),
               dropped)
        .join(Person, Person.id == Message.sender_person_id)
        .where(Message.stream_id == stream_id)
        .order_by(Message.id.desc())
        .limit(limit)
    )  # fmt: skip
    if before_id is not None:
        query = query.where(Message.id < before_id)
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [LineRow(*row) for row in reversed(rows)]


async def has_earlier(engine: AsyncEngine, stream_id: int, message_id: int) -> bool:
    """Whether the chat holds a line older than `message_id`."""
    query = select(Message.id).where(Message.stream_id == stream_id, Message.id < message_id)
    async with engine.connect() as conn:
        return (await conn.execute(query.limit(1))).first() is not None


async def persons(engine: AsyncEngine, words: str, limit: int) -> list[PersonRow]:
    query = (
        select(Person.id, Person.display_name, Identity.user_id)
        .join(Identity, Identity.person_id == Person.id)
        .order_by(Person.id.desc())
        .limit(limit * 3)
    )
    if words:
        like = f"%{words}%"
        query = query.where(or_(Person.display_name.like(like), Identity.user_id.like(like)))
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    found: dict[int, PersonRow] = {}
    for person_id, name, user_id in rows:
        known = found.get(person_id)
        ids = (*known.user_ids, user_id) if known else (user_id,)
        found[person_id] = PersonRow(person_id, name, ids)
    return list(found.values())[:limit]


async def person(engine: AsyncEngine, person_id: int) -> PersonRow | None:
    query = (
        select(Person.display_name, Identity.user_id)
        .join(Identity, Identity.person_id == Person.id)
        .where(Person.id == person_id)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    if not rows:
        return None
    return PersonRow(person_id, rows[0][0], tuple(row[1] for row in rows))


async def message_times(
    engine: AsyncEngine, since: datetime, until: datetime
) -> list[tuple[datetime, bool]]:
    """(time, from_bot) of the messages in [since, until), at most MAX_ACTIVITY_ROWS."""
    query = (
        select(Message.time, Message.from_bot)
        .where(Message.time >= since, Message.time < until)
        .limit(MAX_ACTIVITY_ROWS)
    )
    async with engine.connect() as conn:
        return [(time, bool(bot)) for time, bot in await conn.execute(query)]


async def recent_jobs(engine: AsyncEngine, limit: int) -> list[dict[str, Any]]:
    query = (
        select(Job.id, Job.kind, Job.status, Job.due_at, Job.attempts, Job.max_attempts,
               Job.last_error, Job.updated_at)
        .order_by(Job.updated_at.desc(), Job.id.desc())
        .limit(limit)
    )  # fmt: skip
    async with engine.connect() as conn:
        return [dict(row._mapping) for row in await conn.execute(query)]


async def call_costs(
    engine: AsyncEngine, since: datetime, until: datetime
) -> list[tuple[datetime, float]]:
    """(time, cost) of every model call in [since, until), at most MAX_ACTIVITY_ROWS."""
    query = (
        select(LlmCall.created_at, LlmCall.cost)
        .where(LlmCall.created_at >= since, LlmCall.created_at < until)
        .limit(MAX_ACTIVITY_ROWS)
    )
    async with engine.connect() as conn:
        return [(time, float(cost or 0.0)) for time, cost in await conn.execute(query)]


async def group_title(engine: AsyncEngine, stream_id: int) -> str:
    """A group chat as the owner knows it: its name, and its number."""
    query = select(Stream.name, Stream.external_id).where(Stream.id == stream_id)
    async with engine.connect() as conn:
        row = (await conn.execute(query)).first()
    if row is None:
        return ""
    return f"{row.name}（群 {row.external_id}）" if row.name else f"群 {row.external_id}"


async def platform_has_messages(engine: AsyncEngine, platform: str) -> bool:
    """Whether any chat of `platform` holds a message (the sandbox was tried)."""
    query = (
        select(Message.id)
        .join(Stream, Stream.id == Message.stream_id)
        .where(Stream.platform == platform)
        .limit(1)
    )
    async with engine.connect() as conn:
        return (await conn.execute(query)).first() is not None
