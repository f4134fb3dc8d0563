"""The bot's plans as stored state: promises it made to owners, and what a follow-up needs to
know when its time comes (did anyone speak since, did the turn send words) (docs/persona.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.persona.tables import Promise
from pallas.store.database import Database
from pallas.store.models import Message, Reply


class PromiseState(StrEnum):
    OPEN = "open"
    KEPT = "kept"  # its time came and the bot's own turn ran for it
    DROPPED = "dropped"  # an owner took it back
    EXPIRED = "expired"  # no time was said and it grew old


@dataclass(frozen=True)
class NewPromise:
    self_id: str
    stream_id: int
    person_id: int
    text: str
    due_at: datetime | None
    turn_id: int | None


@dataclass(frozen=True)
class StoredPromise:
    id: int
    self_id: str
    stream_id: int
    person_id: int
    text: str
    made_at: datetime
    due_at: datetime | None
    state: PromiseState


_COLUMNS = (
    Promise.id,
    Promise.self_id,
    Promise.stream_id,
    Promise.person_id,
    Promise.text,
    Promise.made_at,
    Promise.due_at,
    Promise.state,
)


def _stored(row: tuple) -> StoredPromise:  # type: ignore[type-arg]
    *head, state = row
    return StoredPromise(*head, PromiseState(state))


class PromiseStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()

    async def add(self, promise: NewPromise, now: datetime) -> int:
        values = {
            "self_id": promise.self_id,
            "stream_id": promise.stream_id,
            "person_id": promise.person_id,
            "text": promise.text[:200],
            "made_at": now,
            "due_at": promise.due_at,
            "turn_id": promise.turn_id,
            "state": PromiseState.OPEN.value,
        }
        async with self._writes.begin() as conn:
            result = await conn.execute(Promise.__table__.insert().values(**values))
            return int(result.inserted_primary_key[0])

    async def get(self, promise_id: int) -> StoredPromise | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(*_COLUMNS).where(Promise.id == promise_id))).first()
        return _stored(tuple(row)) if row else None

    async def open_in(
        self, stream_id: int, made_after: datetime, limit: int
    ) -> list[StoredPromise]:
        """The chat's open promises, newest first; an untimed one older than `made_after`
        counts as expired (it is closed as such by `expire`)."""
        query = (
            select(*_COLUMNS)
            .where(Promise.stream_id == stream_id, Promise.state == PromiseState.OPEN.value)
            .where((Promise.due_at.is_not(None)) | (Promise.made_at >= made_after))
            .order_by(Promise.id.desc())
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            return [_stored(tuple(row)) for row in await conn.execute(query)]

    async def of_account(self, self_id: str, limit: int = 100) -> list[StoredPromise]:
        """Every promise of one bot account, newest first (the owners' list, the console)."""
        query = (
            select(*_COLUMNS)
            .where(Promise.self_id == self_id)
            .order_by(Promise.id.desc())
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            return [_stored(tuple(row)) for row in await conn.execute(query)]

    async def close(self, promise_id: int, state: PromiseState, now: datetime) -> bool:
        """Close an open promise (False: it was not open)."""
        statement = (
            update(Promise)
            .where(Promise.id == promise_id, Promise.state == PromiseState.OPEN.value)
            .values(state=state.value, closed_at=now)
        )
        async with self._writes.begin() as conn:
            return bool((await conn.execute(statement)).rowcount)

    async def expire(self, made_before: datetime, now: datetime) -> int:
        """Close the untimed open promises made before `made_before`."""
        statement = (
            update(Promise)
            .where(
                Promise.state == PromiseState.OPEN.value,
                Promise.due_at.is_(None),
                Promise.made_at < made_before,
            )
            .values(state=PromiseState.EXPIRED.value, closed_at=now)
        )
        async with self._writes.begin() as conn:
            return int((await conn.execute(statement)).rowcount or 0)


@dataclass(frozen=True)
class SaidSince:
    theirs: int  # messages from others after the mark
    bots: int  # replies the bot committed in later turns of the chat


async def said_since(
    engine: AsyncEngine, stream_id: int, after_message_id: int, after_turn_id: int
) -> SaidSince:
    """What was said in a chat after a turn: others' messages newer than the turn's batch,
    the bot's replies of later turns (its own messages are stored only on their receipts, so
    the turn's own reply may land after any message mark)."""
    theirs = select(func.count()).where(
        Message.stream_id == stream_id,
        Message.id > after_message_id,
        Message.from_bot.is_(False),
    )
    bots = select(func.count()).where(Reply.turn_id > after_turn_id, Reply.stream_id == stream_id)
    async with engine.connect() as conn:
        return SaidSince(int(await conn.scalar(theirs) or 0), int(await conn.scalar(bots) or 0))


async def turn_sent_words(engine: AsyncEngine, turn_id: int) -> bool:
    """Whether the turn committed a reply (not only a poke or a reaction)."""
    query = select(func.count()).where(Reply.turn_id == turn_id)
    async with engine.connect() as conn:
        return bool(await conn.scalar(query))
