"""Learned lines in the store: learning a pair, the candidates for a context, bans, opt-outs.
Every write goes through the database's write rule; reads are one or two index searches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.product.classic.lines import Candidate
from pallas.product.classic.tables import LearnedAnswerer, LearnedBan, LearnedOptOut, LearnedPair
from pallas.store.database import Database

RECOUNT_AFTER = timedelta(minutes=10)  # one person saying it again counts after this long
CANDIDATES = 20


@dataclass(frozen=True)
class Said:
    """A context or an answer as the store keeps it."""

    hash: str
    text: str


@dataclass(frozen=True)
class BanRow:
    id: int
    everywhere: bool
    context: str
    answer: str


@dataclass(frozen=True)
class PairRow:
    id: int
    context: str
    answer: str
    count: int
    answerers: int
    stream_id: int = 0


class LearnedStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()

    async def learn_many(self, sightings: Sequence[Any]) -> None:
        """Sightings (learning.Sighting) in one transaction, in order; those of members who
        opted out are dropped here (one read for the batch)."""
        people = {s.person_id for s in sightings}
        async with self._writes.begin() as conn:
            found = await conn.execute(
                select(LearnedOptOut.person_id).where(LearnedOptOut.person_id.in_(people))
            )
            out = set(found.scalars())
            for s in sightings:
                if s.person_id not in out:
                    await self._learn(
                        conn, s.stream_id, s.context, s.answer, s.segments, s.person_id, s.at
                    )

    async def context_hashes(self) -> set[str]:
        """Every context with an answer (a cache's starting point)."""
        async with self._engine.connect() as conn:
            found = await conn.execute(select(LearnedPair.context_hash).distinct())
            return set(found.scalars())

    async def learn(
        self,
        stream_id: int,
        context: Said,
        answer: Said,
        segments: list[dict[str, Any]],
        person_id: int,
        now: datetime,
    ) -> None:
        """One more sighting of the pair; a person repeating it soon after counts once."""
        async with self._writes.begin() as conn:
            await self._learn(conn, stream_id, context, answer, segments, person_id, now)

    async def _learn(
        self,
        conn: AsyncConnection,
        stream_id: int,
        context: Said,
        answer: Said,
        segments: list[dict[str, Any]],
        person_id: int,
        now: datetime,
    ) -> None:
        pair_id = await self._pair(conn, stream_id, context, answer, segments, now)
        last = await conn.scalar(
            select(LearnedAnswerer.last_at).where(
                LearnedAnswerer.pair_id == pair_id, LearnedAnswerer.person_id == person_id
            )
        )
        if last is not None and now - last < RECOUNT_AFTER:
            return
        values: dict[str, Any] = {"count": LearnedPair.count + 1, "last_seen": now}
        who = (LearnedAnswerer.pair_id == pair_id) & (LearnedAnswerer.person_id == person_id)
        if last is None:
            values["answerers"] = LearnedPair.answerers + 1
            row = {"pair_id": pair_id, "person_id": person_id, "last_at": now}
            await conn.execute(insert(LearnedAnswerer), [row])
        else:
            await conn.execute(update(LearnedAnswerer).where(who).values(last_at=now))
        await conn.execute(update(LearnedPair).where(LearnedPair.id == pair_id).values(values))

    async def _pair(
        self,
        conn: AsyncConnection,
        stream_id: int,
        context: Said,
        answer: Said,
        segments: list[dict[str, Any]],
        now: datetime,
    ) -> int:
        found = await conn.scalar(
            select(LearnedPair.id).where(
                LearnedPair.stream_id == stream_id,
                LearnedPair.context_hash == context.hash,
                LearnedPair.answer_hash == answer.hash,
            )
        )
        if found is not None:
            return int(found)
        row = {
            "stream_id": stream_id, "context_hash": context.hash, "context_text": context.text,
            "answer_hash": answer.hash, "answer_text": answer.text, "answer_segments": segments,
            "count": 0, "answerers": 0, "first_seen": now, "last_seen": now,
        }  # fmt: skip
        added = await conn.execute(insert(LearnedPair).values(**row).returning(LearnedPair.id))
        return int(added.scalar_one())

    async def candidates(self, stream_id: int, context_hash: str) -> list[Candidate]:
        """The answers learned for this context, here and in other groups, less the banned:
        one statement, one search of the context's index."""
        banned = (
            select(LearnedBan.id)
            .where(
                LearnedBan.context_hash == context_hash,
                LearnedBan.answer_hash == LearnedPair.answer_hash,
                or_(LearnedBan.stream_id.is_(None), LearnedBan.stream_id == stream_id),
            )
            .exists()
        )
        query = (
            select(LearnedPair)
            .where(LearnedPair.context_hash == context_hash, ~banned)
            .order_by(LearnedPair.answerers.desc(), LearnedPair.count.desc())
            .limit(CANDIDATES)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_candidate(r, stream_id) for r in rows]

    async def pair(self, pair_id: int) -> LearnedPair | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(LearnedPair).where(LearnedPair.id == pair_id))).first()
        return None if row is None else LearnedPair(**row._mapping)

    async def ban(self, stream_id: int | None, pair: LearnedPair, by: int, now: datetime) -> None:
        row = {
            "stream_id": stream_id, "context_hash": pair.context_hash,
            "context_text": pair.context_text, "answer_hash": pair.answer_hash,
            "answer_text": pair.answer_text, "banned_by": by, "created_at": now,
        }  # fmt: skip
        async with self._writes.begin() as conn:
            await conn.execute(insert(LearnedBan), [row])

    async def bans(self, stream_id: int) -> list[BanRow]:
        query = (
            select(LearnedBan)
            .where(or_(LearnedBan.stream_id.is_(None), LearnedBan.stream_id == stream_id))
            .order_by(LearnedBan.id.desc())
            .limit(50)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [BanRow(r.id, r.stream_id is None, r.context_text, r.answer_text) for r in rows]

    async def lift(self, ban_id: int, stream_id: int, *, owner: bool) -> bool:
        """Lift a ban of this group (an owner's everywhere-ban only by an owner)."""
        where = LearnedBan.stream_id == stream_id
        if owner:
            where = or_(where, LearnedBan.stream_id.is_(None))
        async with self._writes.begin() as conn:
            done = await conn.execute(delete(LearnedBan).where(LearnedBan.id == ban_id, where))
        return bool(done.rowcount)

    async def pairs(self, stream_id: int | None, limit: int = 20) -> list[PairRow]:
        """A group's pairs (every group's for the console), most established first."""
        query = select(LearnedPair).order_by(
            LearnedPair.answerers.desc(), LearnedPair.count.desc()
        )
        if stream_id is not None:
            query = query.where(LearnedPair.stream_id == stream_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query.limit(limit))).all()
        return [
            PairRow(r.id, r.context_text, r.answer_text, r.count, r.answerers, r.stream_id)
            for r in rows
        ]

    async def forget(self, pair_id: int, stream_id: int | None) -> bool:
        """Delete a pair of this group (any group's: the console); it may be learned again."""
        where = LearnedPair.id == pair_id
        if stream_id is not None:
            where = where & (LearnedPair.stream_id == stream_id)
        async with self._writes.begin() as conn:
            done = await conn.execute(delete(LearnedPair).where(where))
            if done.rowcount:
                await conn.execute(
                    delete(LearnedAnswerer).where(LearnedAnswerer.pair_id == pair_id)
                )
        return bool(done.rowcount)

    async def all_bans(self, limit: int = 200) -> list[tuple[int | None, BanRow]]:
        """Every ban with its group (None: everywhere), newest first: the console's list."""
        query = select(LearnedBan).order_by(LearnedBan.id.desc()).limit(limit)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [
            (r.stream_id, BanRow(r.id, r.stream_id is None, r.context_text, r.answer_text))
            for r in rows
        ]

    async def lift_any(self, ban_id: int) -> bool:
        async with self._writes.begin() as conn:
            done = await conn.execute(delete(LearnedBan).where(LearnedBan.id == ban_id))
        return bool(done.rowcount)

    async def opted_out(self, person_id: int) -> bool:
        query = select(LearnedOptOut.person_id).where(LearnedOptOut.person_id == person_id)
        async with self._engine.connect() as conn:
            return await conn.scalar(query) is not None

    async def set_opt_out(self, person_id: int, out: bool, now: datetime) -> None:
        async with self._writes.begin() as conn:
            await conn.execute(delete(LearnedOptOut).where(LearnedOptOut.person_id == person_id))
            if out:
                await conn.execute(
                    insert(LearnedOptOut), [{"person_id": person_id, "created_at": now}]
                )


def _candidate(row: Any, stream_id: int) -> Candidate:
    here = row.stream_id == stream_id
    segments = tuple(row.answer_segments)
    return Candidate(row.id, row.count, row.answerers, here, segments, row.answer_text)
