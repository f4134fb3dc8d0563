"""Reading memory back for a turn: keyword recall over the term index, and the stored vectors
for vector recall. Both are restricted to who is present: the chat's own entries and the
facts of the people in the conversation, those learned elsewhere only with consent."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import and_, or_, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.elements import ColumnElement

from pallas.core.terms import index_terms
from pallas.store.memory import (
    MemoryKind,
    MemoryRecord,
    MemoryStatus,
    owner_key,
    to_record,
)
from pallas.store.models import MemoryConsent, MemoryEntry, MemoryTerm

MAX_QUERY_TERMS = 64
MAX_MATCHED_ENTRIES = 500  # index rows read per recall, at most


@dataclass(frozen=True)
class RecallScope:
    stream_id: int
    person_ids: tuple[int, ...]  # present: recent speakers and the sender
    kinds: tuple[MemoryKind, ...] = (MemoryKind.FACT, MemoryKind.EPISODE)


@dataclass(frozen=True)
class Recalled:
    record: MemoryRecord
    score: float  # 0..1: the share of a query's terms the entry holds (best query)


async def keyword_recall(
    engine: AsyncEngine, queries: Sequence[str], scope: RecallScope, limit: int
) -> list[Recalled]:
    """Entries holding the queries' terms, best first; several queries are deduplicated by
    entry, each keeping its best score."""
    wanted = [terms for q in queries if (terms := _query_terms(q))]
    every_term = sorted(set().union(*wanted)) if wanted else []
    if not every_term or limit <= 0:
        return []
    owners = [owner_key(scope.stream_id, None), *(owner_key(0, p) for p in scope.person_ids)]
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(MemoryTerm.entry_id, MemoryTerm.term)
            .where(MemoryTerm.owner.in_(owners), MemoryTerm.term.in_(every_term))
            .limit(MAX_MATCHED_ENTRIES * 4)
        )
        held: dict[int, set[str]] = defaultdict(set)
        for entry_id, term in rows:
            held[int(entry_id)].add(term)
        if not held:
            return []
        scores = {
            entry: max(len(have & q) / len(q) for q in wanted) for entry, have in held.items()
        }
        best = sorted(scores, key=lambda e: -scores[e])[:MAX_MATCHED_ENTRIES]
        records = await conn.execute(
            select(*_columns()).where(MemoryEntry.id.in_(best), _visible(scope))
        )
        found = [Recalled(to_record(r), scores[int(r.id)]) for r in records]
    found.sort(key=lambda r: (-r.score, -r.record.confidence, -r.record.id))
    return found[:limit]


async def stored_vectors(
    engine: AsyncEngine, scope: RecallScope, model: str, dim: int
) -> list[tuple[MemoryRecord, bytes]]:
    """The visible entries that have a vector from `model` with `dim` dimensions: vectors
    from another model (or another size) live in another space and are never compared."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(*_columns(), MemoryEntry.embedding).where(
                _visible(scope),
                MemoryEntry.embedding_model == model,
                MemoryEntry.embedding_dim == dim,
                MemoryEntry.embedding.is_not(None),
            )
        )
        return [(to_record(r), bytes(r.embedding)) for r in rows]


async def unembedded(
    engine: AsyncEngine, scope: RecallScope, model: str, limit: int
) -> list[MemoryRecord]:
    """Visible entries without a vector from `model` yet (to embed in the background)."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(*_columns())
            .where(_visible(scope), MemoryEntry.embedding_model != model)
            .limit(limit)
        )
        return [to_record(r) for r in rows]


def _query_terms(query: str) -> frozenset[str]:
    terms = index_terms(query)
    return frozenset(sorted(terms)[:MAX_QUERY_TERMS]) if len(terms) > MAX_QUERY_TERMS else terms


def _columns() -> list[ColumnElement[object]]:
    return [c for c in MemoryEntry.__table__.c if c.name != "embedding"]


def _visible(scope: RecallScope) -> ColumnElement[bool]:
    """Active entries of the wanted kinds: the chat's own (about the group or a present
    person), and present people's facts from other chats when they consented."""
    consented = select(MemoryConsent.person_id).where(
        MemoryConsent.person_id.in_(scope.person_ids or (-1,))
    )
    here = and_(
        MemoryEntry.stream_id == scope.stream_id,
        or_(MemoryEntry.person_id.is_(None), MemoryEntry.person_id.in_(scope.person_ids or (-1,))),
    )
    elsewhere = and_(
        MemoryEntry.kind == MemoryKind.FACT.value,
        MemoryEntry.person_id.in_(consented),
    )
    return and_(
        MemoryEntry.status == MemoryStatus.ACTIVE.value,
        MemoryEntry.kind.in_([k.value for k in scope.kinds]),
        or_(here, elsewhere),
    )
