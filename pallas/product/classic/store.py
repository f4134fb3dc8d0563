"""Learned lines in the store: learning a pair, the candidates for a context, bans, opt-outs.
Every write goes through the database's write rule; reads are one or two index searches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, delete, insert, or_, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.product.classic.lines import Candidate
from pallas.product.classic.tables import LearnedAnswerer, LearnedBan, LearnedOptOut, LearnedPair
from pallas.store.database import Database
from pallas.store.models import Message

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
        """Sightings (learning.Sighting, one per pair and person) in one transaction of a
        few statements whatever their number; those of members who opted out are dropped."""
        if not sightings:
            return
        async with self._writes.begin() as conn:
            people = {p for s in sightings for p in (s.person_id, s.context_person)}
            out = await _opted_out(conn, people)
            recalled = await _recalled(conn, {line for s in sightings for line in s.lines})
            kept = [
                s for s in sightings
                if not out.intersection((s.person_id, s.context_person))
                and not recalled.intersection(s.lines)
            ]  # fmt: skip
            if kept:
                ids = await _pair_ids(conn, kept)
                await _count(conn, kept, ids)

    async def context_hashes(self) -> set[str]:
        """Every context with an answer (a cache's starting point)."""
        async with self._engine.connect() as conn:
            found = await conn.execute(select(LearnedPair.context_hash).distinct())
            return set(found.scalars())

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
            # This group's own first: other groups' common answers never crowd them out.
            .order_by(
                (LearnedPair.stream_id == stream_id).desc(),
                LearnedPair.answerers.desc(),
                LearnedPair.count.desc(),
            )
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
        await self.ban_said(
            stream_id,
            Said(pair.context_hash, pair.context_text),
            Said(pair.answer_hash, pair.answer_text),
            by,
            now,
        )

    async def ban_said(
        self, stream_id: int | None, context: Said, answer: Said, by: int, now: datetime
    ) -> None:
        """Ban an answer for a context (here, or everywhere with no group); a ban already
        there is kept, not doubled (one lift lifts it)."""
        where = LearnedBan.stream_id.is_(None) if stream_id is None else (
            LearnedBan.stream_id == stream_id
        )
        row = {
            "stream_id": stream_id, "context_hash": context.hash, "context_text": context.text,
            "answer_hash": answer.hash, "answer_text": answer.text, "banned_by": by,
            "created_at": now,
        }  # fmt: skip
        async with self._writes.begin() as conn:
            there = await conn.scalar(
                select(LearnedBan.id).where(
                    where,
                    LearnedBan.context_hash == context.hash,
                    LearnedBan.answer_hash == answer.hash,
                )
            )
            if there is None:
                await conn.execute(insert(LearnedBan), [row])

    async def context_text(self, context_hash: str) -> str:
        """How a context was written when learned ("" when no pair has it any more)."""
        query = select(LearnedPair.context_text).where(LearnedPair.context_hash == context_hash)
        async with self._engine.connect() as conn:
            return str(await conn.scalar(query.limit(1)) or "")

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

    async def lift(self, ban_id: int, stream_id: int | None, *, owner: bool) -> bool:
        """Lift a ban: of this group, an owner's everywhere-ban only by an owner; with no
        group (the console), any ban."""
        where = LearnedBan.id == ban_id
        if stream_id is not None:
            here = LearnedBan.stream_id == stream_id
            where = where & (or_(here, LearnedBan.stream_id.is_(None)) if owner else here)
        async with self._writes.begin() as conn:
            done = await conn.execute(delete(LearnedBan).where(where))
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
    return Candidate(
        row.id, row.count, row.answerers, here, segments, row.answer_text, row.answer_hash
    )


def _pair_key(s: Any) -> tuple[int, str, str]:
    return (s.stream_id, s.context.hash, s.answer.hash)


async def _opted_out(conn: AsyncConnection, people: set[int]) -> set[int]:
    found = await conn.execute(
        select(LearnedOptOut.person_id).where(LearnedOptOut.person_id.in_(people))
    )
    return set(found.scalars())


async def _recalled(conn: AsyncConnection, lines: set[int]) -> set[int]:
    """The lines recalled since they were said: a pair is never learned from one."""
    found = await conn.execute(
        select(Message.id).where(Message.id.in_(lines - {0}), Message.recalled.is_(True))
    )
    return set(found.scalars())


async def _pair_ids(
    conn: AsyncConnection, sightings: Sequence[Any]
) -> dict[tuple[int, str, str], int]:
    """Each sighting's pair, added when new (one insert for all, one read for their ids)."""
    first = {_pair_key(s): s for s in reversed(sightings)}
    rows = [
        {"stream_id": s.stream_id, "context_hash": s.context.hash, "context_text": s.context.text,
         "answer_hash": s.answer.hash, "answer_text": s.answer.text,
         "answer_segments": s.segments, "count": 0, "answerers": 0, "first_seen": s.at,
         "last_seen": s.at}
        for s in first.values()
    ]  # fmt: skip
    table = LearnedPair.__table__
    keys = ["stream_id", "context_hash", "answer_hash"]
    insert_new = (pg_insert(table) if conn.dialect.name == "postgresql" else sqlite_insert(table))
    await conn.execute(insert_new.on_conflict_do_nothing(index_elements=keys), rows)
    wanted = tuple_(LearnedPair.stream_id, LearnedPair.context_hash, LearnedPair.answer_hash)
    found = await conn.execute(
        select(LearnedPair.id, LearnedPair.stream_id, LearnedPair.context_hash,
               LearnedPair.answer_hash).where(wanted.in_(list(first)))
    )  # fmt: skip
    return {(r.stream_id, r.context_hash, r.answer_hash): r.id for r in found}


async def _count(
    conn: AsyncConnection, sightings: Sequence[Any], ids: dict[tuple[int, str, str], int]
) -> None:
    """Each pair's count and answerers: a person counts again only after RECOUNT_AFTER."""
    people = {(ids[_pair_key(s)], s.person_id): s for s in sightings}
    who = tuple_(LearnedAnswerer.pair_id, LearnedAnswerer.person_id)
    found = await conn.execute(
        select(LearnedAnswerer.pair_id, LearnedAnswerer.person_id, LearnedAnswerer.last_at)
        .where(who.in_(list(people)))
    )  # fmt: skip
    last = {(r.pair_id, r.person_id): r.last_at for r in found}
    new, again, counts = [], [], {}
    for (pair_id, person_id), s in people.items():
        before = last.get((pair_id, person_id))
        if before is not None and s.at - before < RECOUNT_AFTER:
            continue
        count = counts.setdefault(pair_id, {"p": pair_id, "c": 0, "a": 0, "seen": s.at})
        count["c"] += 1
        count["seen"] = max(count["seen"], s.at)
        if before is None:
            count["a"] += 1
            new.append({"pair_id": pair_id, "person_id": person_id, "last_at": s.at})
        else:
            again.append({"p": pair_id, "who": person_id, "seen": s.at})
    if new:
        await conn.execute(insert(LearnedAnswerer), new)
    if again:
        await conn.execute(
            update(LearnedAnswerer)
            .where(
                LearnedAnswerer.pair_id == bindparam("p"),
                LearnedAnswerer.person_id == bindparam("who"),
            )
            .values(last_at=bindparam("seen")),
            again,
        )
    if counts:
        await conn.execute(
            update(LearnedPair)
            .where(LearnedPair.id == bindparam("p"))
            .values(
                count=LearnedPair.count + bindparam("c"),
                answerers=LearnedPair.answerers + bindparam("a"),
                last_seen=bindparam("seen"),
            ),
            list(counts.values()),
        )
