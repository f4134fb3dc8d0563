"""Reminders in the store: added within the limits, listed, cancelled, moved on."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.tasks.tables import ReminderRow
from pallas.product.tasks.when import Rhythm
from pallas.store.database import Database

MAX_OPEN_PER_PERSON = 10
MAX_OPEN_PER_CHAT = 30
LIST_LIMIT = 30


class ReminderStatus(StrEnum):
    OPEN = "open"
    DONE = "done"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class NewReminder:
    stream_id: int
    person_id: int
    user_id: str
    account: str
    text: str
    due_at: datetime
    rhythm: Rhythm | None = None


@dataclass(frozen=True)
class Reminder:
    id: int
    stream_id: int
    person_id: int
    user_id: str
    account: str
    text: str
    due_at: datetime
    rhythm: Rhythm | None
    status: str


class TooMany(Exception):
    """The asker, or the chat, has as many open reminders as allowed."""


class ReminderStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()

    async def add(self, new: NewReminder, now: datetime) -> int:
        """The new reminder's id; TooMany past the limits (checked in the same transaction)."""
        async with self._writes.begin() as conn:
            mine = await conn.scalar(_open_count(ReminderRow.person_id == new.person_id))
            here = await conn.scalar(_open_count(ReminderRow.stream_id == new.stream_id))
            if (mine or 0) >= MAX_OPEN_PER_PERSON or (here or 0) >= MAX_OPEN_PER_CHAT:
                raise TooMany
            result = await conn.execute(
                insert(ReminderRow).values(
                    stream_id=new.stream_id, person_id=new.person_id, user_id=new.user_id,
                    account=new.account, text=new.text, due_at=new.due_at,
                    rhythm=None if new.rhythm is None else new.rhythm.to_json(),
                    status=ReminderStatus.OPEN.value, created_at=now, updated_at=now,
                )
            )  # fmt: skip
            return int(result.inserted_primary_key[0])

    async def get(self, reminder_id: int) -> Reminder | None:
        query = select(ReminderRow).where(ReminderRow.id == reminder_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _reminder(row)

    async def open_ones(self, person_id: int | None) -> list[Reminder]:
        """Open reminders, soonest first: one person's, or everyone's (None: an owner)."""
        query = select(ReminderRow).where(ReminderRow.status == ReminderStatus.OPEN.value)
        if person_id is not None:
            query = query.where(ReminderRow.person_id == person_id)
        query = query.order_by(ReminderRow.due_at, ReminderRow.id).limit(LIST_LIMIT)
        async with self._engine.connect() as conn:
            return [_reminder(row) for row in await conn.execute(query)]

    async def cancel(self, reminder_id: int, person_id: int | None, now: datetime) -> bool:
        """Cancel an open reminder of the person's (any, for None: an owner)."""
        statement = update(ReminderRow).where(
            ReminderRow.id == reminder_id, ReminderRow.status == ReminderStatus.OPEN.value
        )
        if person_id is not None:
            statement = statement.where(ReminderRow.person_id == person_id)
        async with self._writes.begin() as conn:
            result = await conn.execute(
                statement.values(status=ReminderStatus.CANCELLED.value, updated_at=now)
            )
        return bool(result.rowcount)

    async def moved_on(
        self, reminder_id: int, fired: datetime, next_due: datetime | None, now: datetime
    ) -> None:
        """After the time `fired`: due next at `next_due`, or done. Only from that time: a
        second run of the same firing changes nothing."""
        values = (
            {"due_at": next_due} if next_due is not None
            else {"status": ReminderStatus.DONE.value}
        )  # fmt: skip
        async with self._writes.begin() as conn:
            await conn.execute(
                update(ReminderRow)
                .where(ReminderRow.id == reminder_id, ReminderRow.due_at == fired)
                .values(**values, updated_at=now)
            )


def _open_count(condition: Any) -> Any:
    return (
        select(func.count())
        .select_from(ReminderRow)
        .where(condition, ReminderRow.status == ReminderStatus.OPEN.value)
    )


def _reminder(row: Any) -> Reminder:
    rhythm = None if row.rhythm is None else Rhythm.from_json(row.rhythm)
    return Reminder(row.id, row.stream_id, row.person_id, row.user_id, row.account, row.text,
                    row.due_at, rhythm, row.status)  # fmt: skip
