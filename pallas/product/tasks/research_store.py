"""Research tasks in the store: started within the limits, listed, cancelled, finished."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import Row, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.tasks.tables import ResearchRow
from pallas.store.database import Database

MAX_RUNNING_PER_PERSON = 2
MAX_RUNNING_PER_CHAT = 5
LIST_LIMIT = 10
STALE = timedelta(hours=1)  # a run ends within minutes; one still running after this was lost


class ResearchStatus(StrEnum):
    RUNNING = "running"
    ANSWERING = "answering"  # its answer is being said: too late to cancel
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"  # out of time or rounds, or no model: said so in the chat


STATUS_WORDS = {"running": "在查", "answering": "查完了", "done": "查完了", "cancelled": "取消了",
                "failed": "没查成"}  # fmt: skip


@dataclass(frozen=True)
class Research:
    id: int
    stream_id: int
    person_id: int
    user_id: str
    account: str
    question: str
    status: str
    created_at: datetime


class TooManyResearch(Exception):
    """The asker, or the chat, has as many research tasks running as allowed."""


class ResearchStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()

    async def start(
        self, stream_id: int, person_id: int, user_id: str, account: str, question: str,
        now: datetime,
    ) -> int:  # fmt: skip
        limits = ((ResearchRow.person_id, person_id, MAX_RUNNING_PER_PERSON),
                  (ResearchRow.stream_id, stream_id, MAX_RUNNING_PER_CHAT))  # fmt: skip
        async with self._writes.begin() as conn:
            # A task whose job was lost (it crashed on every attempt) no longer holds a place.
            await conn.execute(update(ResearchRow).where(
                ResearchRow.status == "running", ResearchRow.updated_at < now - STALE,
            ).values(status="failed", outcome="lost", updated_at=now))  # fmt: skip
            for column, value, limit in limits:
                running = select(func.count()).where(column == value,
                                                     ResearchRow.status == "running")  # fmt: skip
                if int((await conn.execute(running)).scalar() or 0) >= limit:
                    raise TooManyResearch(column.key)
            row = {"stream_id": stream_id, "person_id": person_id, "user_id": user_id,
                   "account": account, "question": question, "status": "running",
                   "outcome": "", "created_at": now, "updated_at": now}  # fmt: skip
            result = await conn.execute(insert(ResearchRow).values(**row).returning(ResearchRow.id))
            return int(result.scalar_one())

    async def get(self, research_id: int) -> Research | None:
        query = select(ResearchRow).where(ResearchRow.id == research_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _research(row)

    async def recent(self, person_id: int | None, limit: int = LIST_LIMIT) -> list[Research]:
        """The newest ones of a person (everyone's: None), running first."""
        query = select(ResearchRow).order_by(ResearchRow.id.desc()).limit(limit)
        if person_id is not None:
            query = query.where(ResearchRow.person_id == person_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        found = [_research(row) for row in rows]
        return sorted(found, key=lambda r: r.status != "running")

    async def cancel(self, research_id: int, person_id: int | None, now: datetime) -> bool:
        """Cancel a running one (of `person_id`, or anyone's: None); whether it was."""
        return await self._move(research_id, ResearchStatus.RUNNING, ResearchStatus.CANCELLED,
                                "asked", now, person_id)  # fmt: skip

    async def answering(self, research_id: int, now: datetime) -> bool:
        """Take a running one (or one already answering: a run again after a crash) to
        answering; False when it was cancelled meanwhile, and nothing may be said."""
        if await self._move(research_id, ResearchStatus.RUNNING, ResearchStatus.ANSWERING, "",
                            now, None):  # fmt: skip
            return True
        found = await self.get(research_id)
        return found is not None and found.status == ResearchStatus.ANSWERING.value

    async def finish(self, research_id: int, status: ResearchStatus, outcome: str,
                     now: datetime) -> bool:  # fmt: skip
        return await self._move(research_id, ResearchStatus.ANSWERING, status, outcome, now, None)

    async def _move(self, research_id: int, was: ResearchStatus, status: ResearchStatus,
                    outcome: str, now: datetime, person_id: int | None) -> bool:  # fmt: skip
        query = update(ResearchRow).where(ResearchRow.id == research_id,
                                          ResearchRow.status == was.value)  # fmt: skip
        if person_id is not None:
            query = query.where(ResearchRow.person_id == person_id)
        values = {"status": status.value, "outcome": outcome[:200], "updated_at": now}
        async with self._writes.begin() as conn:
            return (await conn.execute(query.values(**values))).rowcount > 0


def _research(row: Row[Any]) -> Research:
    return Research(row.id, row.stream_id, row.person_id, row.user_id, row.account,
                    row.question, row.status, row.created_at)  # fmt: skip
