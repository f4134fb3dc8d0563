"""The group's terms and expression samples in the store (docs/slang.md).

A term's row is made when noticing first sees it used in two lines of one run; later runs add
their lines and speakers. It is offered to the extraction call when ripe (rules.py), learned
when the model's meaning passes the rules, corrected or deleted by an admin; a deleted term
is never offered or shown again until an admin gives it a meaning.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, case, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.product.slang.noticing import EVIDENCE_IDS, SampleSeen, Sighting
from pallas.product.slang.rules import MAX_OFFERS
from pallas.product.slang.tables import ExpressionSample, SlangCursor, SlangTerm
from pallas.store.database import Database
from pallas.store.models import Message

MAX_MEMBERS = 20
MAX_CANDIDATES = 300  # unlearned terms kept per group; the least used go first
MAX_SAMPLES = 60  # per group; the lightest and oldest go first
LEARNED = "learned"
ADMIN = "admin"
DELETED = "deleted"


@dataclass(frozen=True)
class Term:
    id: int
    stream_id: int
    term: str
    meaning: str | None
    source: str
    lines: int
    members: int
    evidence: tuple[int, ...]
    learned_from: tuple[int, ...]
    learned_at: datetime | None
    learned_lines: int
    offers: int
    offered_lines: int
    first_seen: datetime
    last_seen: datetime
    last_used_at: datetime | None
    taught_by: str
    confidence: float


@dataclass(frozen=True)
class Sample:
    id: int
    stream_id: int
    message_id: int
    text: str
    cue: str
    weight: float
    kept_at: datetime


def _term(row: object) -> Term:
    r = row._mapping
    return Term(r["id"], r["stream_id"], r["term"], r["meaning"], r["source"], r["lines"],
                len(r["members"] or ()), tuple(r["evidence"] or ()),
                tuple(r["learned_from"] or ()), r["learned_at"], r["learned_lines"],
                r["offers"], r["offered_lines"], r["first_seen"], r["last_seen"],
                r["last_used_at"], r["taught_by"], r["confidence"])  # fmt: skip


class SlangStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()
        # Per group, read at every turn: the learned meanings and the samples, kept until
        # this process writes them (the only writer). A read that began before a write is not
        # kept: the generation it started under has passed.
        self._meanings: dict[int, dict[str, str]] = {}
        # Samples kept a minute at most: a recall or the clean-up removes lines elsewhere.
        self._samples: dict[int, tuple[float, list[Sample]]] = {}
        self._generation = 0

    def _changed(self, stream_id: int) -> None:
        self._generation += 1
        self._meanings.pop(stream_id, None)
        self._samples.pop(stream_id, None)

    async def cursor(self, stream_id: int) -> int:
        async with self._engine.connect() as conn:
            found = await conn.execute(
                select(SlangCursor.last_message_id).where(SlangCursor.stream_id == stream_id)
            )
            return int(found.scalar() or 0)

    # -- terms ------------------------------------------------------------------------------

    async def terms(self, stream_id: int) -> list[Term]:
        query = select(*SlangTerm.__table__.c).where(SlangTerm.stream_id == stream_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query.order_by(SlangTerm.term))).all()
        return [_term(row) for row in rows]

    async def term(self, stream_id: int, term: str) -> Term | None:
        query = select(*SlangTerm.__table__.c).where(
            SlangTerm.stream_id == stream_id, SlangTerm.term == term
        )
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _term(row)

    async def known_terms(self, stream_id: int) -> list[str]:
        async with self._engine.connect() as conn:
            rows = await conn.execute(
                select(SlangTerm.term).where(SlangTerm.stream_id == stream_id)
            )
        return [row[0] for row in rows]

    async def record(
        self, stream_id: int, sightings: Sequence[Sighting], up_to: int, now: datetime
    ) -> None:
        """Add a run's sightings (new rows for new terms, lines and speakers for known ones)
        and move the chat's cursor to `up_to`, in one transaction."""
        table = SlangTerm.__table__
        async with self._writes.begin() as conn:
            await _move_cursor(conn, stream_id, up_to)
            if not sightings:
                return
            found = await conn.execute(
                select(table.c.term, table.c.members, table.c.evidence).where(
                    table.c.stream_id == stream_id,
                    table.c.term.in_([s.term for s in sightings]),
                )
            )
            known = {row.term: (row.members, row.evidence) for row in found}
            for seen in sightings:
                if seen.term in known:
                    members, evidence = known[seen.term]
                    await conn.execute(
                        update(table)
                        .where(table.c.stream_id == stream_id, table.c.term == seen.term)
                        .values(
                            lines=table.c.lines + seen.lines,
                            members=_merged(members, sorted(seen.user_ids), MAX_MEMBERS),
                            evidence=[*evidence, *seen.message_ids][-EVIDENCE_IDS:],
                            last_seen=now,
                        )
                    )
                else:
                    await conn.execute(insert(table).values(
                        stream_id=stream_id, term=seen.term, meaning=None, source="",
                        lines=seen.lines, members=sorted(seen.user_ids)[:MAX_MEMBERS],
                        evidence=list(seen.message_ids), confidence=0.0, first_seen=now,
                        last_seen=now, learned_at=None, learned_lines=0, learned_from=[],
                        taught_by="", offers=0, offered_lines=0, last_used_at=None,
                    ))  # fmt: skip
            await _trim_candidates(conn, stream_id)

    async def mark_offered(self, stream_id: int, terms: Iterable[Term]) -> None:
        table = SlangTerm.__table__
        async with self._writes.begin() as conn:
            for term in terms:
                await conn.execute(
                    update(table)
                    .where(table.c.id == term.id)
                    .values(offers=table.c.offers + int(term.meaning is None),
                            offered_lines=term.lines)
                )

    async def learn(
        self, stream_id: int, term: str, meaning: str, from_ids: Sequence[int], by: str,
        confidence: float, now: datetime,
    ) -> bool:  # fmt: skip
        """The model's meaning; never over an admin's meaning or a deleted term."""
        table = SlangTerm.__table__
        async with self._writes.begin() as conn:
            changed = await conn.execute(
                update(table)
                .where(table.c.stream_id == stream_id, table.c.term == term,
                       table.c.source.in_(("", LEARNED)))
                .values(meaning=meaning, source=LEARNED, learned_at=now,
                        learned_lines=table.c.lines, learned_from=list(from_ids)[:EVIDENCE_IDS],
                        taught_by=by, confidence=confidence)
            )
        self._changed(stream_id)
        return bool(changed.rowcount)

    async def set_meaning(
        self, stream_id: int, term: str, meaning: str, by: str, now: datetime
    ) -> None:
        """An admin's meaning (a new term or a correction): kept over anything learned."""
        table = SlangTerm.__table__
        values = dict(meaning=meaning, source=ADMIN, learned_at=now, taught_by=by,
                      confidence=1.0)  # fmt: skip
        async with self._writes.begin() as conn:
            changed = await conn.execute(
                update(table)
                .where(table.c.stream_id == stream_id, table.c.term == term)
                .values(**values, learned_lines=table.c.lines)
            )
            if not changed.rowcount:
                await conn.execute(insert(table).values(
                    stream_id=stream_id, term=term, lines=0, members=[], evidence=[],
                    first_seen=now, last_seen=now, learned_lines=0, learned_from=[],
                    offers=0, offered_lines=0, last_used_at=None, **values,
                ))  # fmt: skip
        self._changed(stream_id)

    async def delete(self, stream_id: int, term: str, by: str) -> bool:
        """Forget a meaning for good: the term stays, marked, so it is not learned again."""
        table = SlangTerm.__table__
        async with self._writes.begin() as conn:
            changed = await conn.execute(
                update(table)
                .where(table.c.stream_id == stream_id, table.c.term == term,
                       table.c.source != DELETED)
                .values(meaning=None, source=DELETED, taught_by=by)
            )
        self._changed(stream_id)
        return bool(changed.rowcount)

    async def meanings(self, stream_id: int) -> dict[str, str]:
        """The group's terms with a meaning, learned or an admin's."""
        cached = self._meanings.get(stream_id)
        if cached is not None:
            return cached
        generation = self._generation
        table = SlangTerm.__table__
        query = select(table.c.term, table.c.meaning).where(
            table.c.stream_id == stream_id, table.c.meaning.is_not(None),
            table.c.source.in_((LEARNED, ADMIN)),
        )  # fmt: skip
        async with self._engine.connect() as conn:
            found = {row.term: row.meaning for row in await conn.execute(query)}
        if generation == self._generation:
            self._meanings[stream_id] = found
        return found

    async def used(self, stream_id: int, terms: Iterable[str], now: datetime) -> None:
        table = SlangTerm.__table__
        async with self._writes.begin() as conn:
            await conn.execute(
                update(table)
                .where(table.c.stream_id == stream_id, table.c.term.in_(list(terms)))
                .values(last_used_at=now)
            )

    async def groups(self) -> list[tuple[int, int, int]]:
        """(stream id, terms with a meaning, samples) of every group that has either."""
        terms = select(SlangTerm.stream_id, func.count()).where(
            SlangTerm.meaning.is_not(None)).group_by(SlangTerm.stream_id)  # fmt: skip
        samples = select(ExpressionSample.stream_id, func.count()).group_by(
            ExpressionSample.stream_id)  # fmt: skip
        async with self._engine.connect() as conn:
            meant = dict((await conn.execute(terms)).tuples().all())
            kept = dict((await conn.execute(samples)).tuples().all())
        return [(s, meant.get(s, 0), kept.get(s, 0)) for s in sorted({*meant, *kept})]

    # -- samples ----------------------------------------------------------------------------

    async def keep_samples(
        self, stream_id: int, seen: Sequence[tuple[SampleSeen, str]], now: datetime
    ) -> int:
        """New samples (each with the text of the line it answered); how many were new."""
        table = ExpressionSample.__table__
        if not seen:
            return 0
        async with self._writes.begin() as conn:
            have = set((await conn.execute(select(table.c.message_id).where(
                table.c.stream_id == stream_id,
                table.c.message_id.in_([s.message_id for s, _ in seen]),
            ))).scalars())  # fmt: skip
            new = [(s, cue) for s, cue in seen if s.message_id not in have]
            for sample, cue in new:
                await conn.execute(insert(table).values(
                    stream_id=stream_id, message_id=sample.message_id, text=sample.text[:100],
                    cue=cue[:100], weight=1.0, kept_at=now,
                ))  # fmt: skip
            await _trim_samples(conn, stream_id)
        if new:
            self._changed(stream_id)
        return len(new)

    async def answered(self, stream_id: int, quoted: Sequence[str]) -> None:
        """Samples quoted by later lines (their platform ids) landed well: they weigh more."""
        if not quoted:
            return
        table = ExpressionSample.__table__
        lines = select(Message.id).where(Message.stream_id == stream_id,
                                         Message.platform_message_id.in_(list(quoted)))  # fmt: skip
        async with self._writes.begin() as conn:
            for message_id in (await conn.execute(lines)).scalars().all():
                await conn.execute(
                    update(table)
                    .where(table.c.stream_id == stream_id, table.c.message_id == message_id)
                    .values(weight=table.c.weight + 1.0)
                )
        self._changed(stream_id)

    async def samples(self, stream_id: int, limit: int = MAX_SAMPLES) -> list[Sample]:
        """The heaviest samples whose line still stands (not recalled, not silenced)."""
        cached = self._samples.get(stream_id)
        if cached is not None and limit == MAX_SAMPLES and time.monotonic() - cached[0] < 60:
            return cached[1]
        generation = self._generation
        table = ExpressionSample.__table__
        query = (
            select(*table.c)
            .join(Message, Message.id == table.c.message_id)
            .where(table.c.stream_id == stream_id, Message.recalled.is_(False),
                   Message.suppressed.is_(False))
            .order_by(table.c.weight.desc(), table.c.id.desc())
            .limit(limit)
        )  # fmt: skip
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        found = [Sample(r.id, r.stream_id, r.message_id, r.text, r.cue, r.weight, r.kept_at)
                 for r in rows]  # fmt: skip
        if limit == MAX_SAMPLES and generation == self._generation:
            self._samples[stream_id] = (time.monotonic(), found)
        return found

    async def drop_sample(self, sample_id: int) -> bool:
        table = ExpressionSample.__table__
        async with self._writes.begin() as conn:
            gone = await conn.execute(delete(table).where(table.c.id == sample_id))
        self._generation += 1
        self._samples.clear()
        return bool(gone.rowcount)


def _merged(old: Sequence[str] | None, new: Sequence[str], cap: int) -> list[str]:
    return list(dict.fromkeys([*(old or ()), *new]))[:cap]


async def _trim_candidates(conn: AsyncConnection, stream_id: int) -> None:
    table = SlangTerm.__table__
    unlearned = and_(table.c.stream_id == stream_id, table.c.source == "")
    count = (await conn.execute(select(func.count()).where(unlearned))).scalar_one()
    if count <= MAX_CANDIDATES:
        return
    # Terms given up on (offered twice, never learned) go first, then the least used: new
    # terms always find room.
    given_up = case((table.c.offers >= MAX_OFFERS, 0), else_=1)
    order = (given_up, table.c.lines, table.c.last_seen)
    losers = select(table.c.id).where(unlearned).order_by(*order).limit(count - MAX_CANDIDATES)
    await conn.execute(delete(table).where(table.c.id.in_(losers)))


async def _trim_samples(conn: AsyncConnection, stream_id: int) -> None:
    table = ExpressionSample.__table__
    mine = table.c.stream_id == stream_id
    count = (await conn.execute(select(func.count()).where(mine))).scalar_one()
    if count <= MAX_SAMPLES:
        return
    losers = (select(table.c.id).where(mine)
              .order_by(table.c.weight, table.c.id).limit(count - MAX_SAMPLES))  # fmt: skip
    await conn.execute(delete(table).where(table.c.id.in_(losers)))




async def _move_cursor(conn: AsyncConnection, stream_id: int, up_to: int) -> None:
    table = SlangCursor.__table__
    query = select(table.c.last_message_id).where(table.c.stream_id == stream_id)
    at = (await conn.execute(query)).scalar()
    if at is None:
        await conn.execute(insert(table).values(stream_id=stream_id, last_message_id=up_to))
    elif at < up_to:  # never back: an overlapping run that read less does not undo this one
        await conn.execute(
            update(table).where(table.c.stream_id == stream_id).values(last_message_id=up_to)
        )
