"""Reading memory back for a turn: keyword recall over the term index, and the stored vectors
for vector recall. Both are restricted to who is present: the chat's own entries and the
facts of the people in the conversation, those learned elsewhere only with consent."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
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
MAX_MATCHED_ENTRIES = 500  # best-scored entries checked for visibility, at most


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
            select(MemoryTerm.entry_id, MemoryTerm.term).where(
                MemoryTerm.owner.in_(owners), MemoryTerm.term.in_(every_term)
            )
        )
        held: dict[int, set[str]] = defaultdict(set)
        for entry_id, term in rows:
            held[int(entry_id)].add(term)
        if not held:
            return []
        scores = {e: max(len(have & q) / len(q) for q in wanted) for e, have in held.items()}
        best = sorted(scores, key=lambda e: -scores[e])[:MAX_MATCHED_ENTRIES]
        visible = await _visible_among(conn, scope, best)
        ranked = sorted(visible, key=lambda v: (-scores[v.id], -v.confidence, -v.id))[:limit]
        records = await _records(conn, [v.id for v in ranked])
    return [Recalled(records[v.id], scores[v.id]) for v in ranked if v.id in records]


async def stored_vectors(
    engine: AsyncEngine, scope: RecallScope, model: str, dim: int
) -> list[tuple[int, bytes]]:
    """(entry id, vector) of the visible entries that have a vector from `model` with `dim`
    dimensions: vectors from another model (or another size) live in another space and are
    never compared. Two indexed reads: the present people's entries, the chat's own."""
    same_space = (
        (MemoryEntry.embedding_model == model)
        & (MemoryEntry.embedding_dim == dim)
        & MemoryEntry.embedding.is_not(None)
    )
    columns = [*_VISIBILITY_COLUMNS, MemoryEntry.embedding]
    async with engine.connect() as conn:
        consenting = await _consenting(conn, scope.person_ids)
        people = await conn.execute(
            select(*columns).where(
                MemoryEntry.person_id.in_(scope.person_ids or (-1,)), _active(scope), same_space
            )
        )
        group = await conn.execute(
            select(*columns).where(
                MemoryEntry.stream_id == scope.stream_id,
                MemoryEntry.person_id.is_(None),
                _active(scope),
                same_space,
            )
        )
        rows = [*people, *group]
    return [(r.id, bytes(r.embedding)) for r in rows if _may_see(r, scope, consenting)]


async def load_records(engine: AsyncEngine, entry_ids: Sequence[int]) -> dict[int, MemoryRecord]:
    async with engine.connect() as conn:
        return await _records(conn, entry_ids)


async def unembedded(
    engine: AsyncEngine, scope: RecallScope, model: str, limit: int
) -> list[MemoryRecord]:
    """Visible entries without a vector from `model` yet (to embed in the background)."""
    async with engine.connect() as conn:
        consenting = await _consenting(conn, scope.person_ids)
        rows = await conn.execute(
            select(*_RECORD_COLUMNS)
            .where(
                MemoryEntry.person_id.in_(scope.person_ids or (-1,)),
                _active(scope),
                MemoryEntry.embedding_model != model,
            )
            .limit(limit)
        )
        return [to_record(r) for r in rows if _may_see(r, scope, consenting)]


_RECORD_COLUMNS = [c for c in MemoryEntry.__table__.c if c.name != "embedding"]
_VISIBILITY_COLUMNS = [
    MemoryEntry.id,
    MemoryEntry.kind,
    MemoryEntry.stream_id,
    MemoryEntry.person_id,
    MemoryEntry.confidence,
]


def _query_terms(query: str) -> frozenset[str]:
    terms = index_terms(query)
    return frozenset(sorted(terms)[:MAX_QUERY_TERMS]) if len(terms) > MAX_QUERY_TERMS else terms


def _active(scope: RecallScope) -> ColumnElement[bool]:
    return (MemoryEntry.status == MemoryStatus.ACTIVE.value) & MemoryEntry.kind.in_(
        [k.value for k in scope.kinds]
    )


def _may_see(row: Any, scope: RecallScope, consenting: frozenset[int]) -> bool:
    """The chat's own entries about the group or a present person; a present person's facts
    from elsewhere only with their consent."""
    if row.person_id is not None and row.person_id not in scope.person_ids:
        return False
    if row.stream_id == scope.stream_id:
        return True
    return row.kind == MemoryKind.FACT.value and row.person_id in consenting


async def _consenting(conn: AsyncConnection, person_ids: Sequence[int]) -> frozenset[int]:
    if not person_ids:
        return frozenset()
    rows = await conn.execute(
        select(MemoryConsent.person_id).where(MemoryConsent.person_id.in_(person_ids))
    )
    return frozenset(int(r[0]) for r in rows)


async def _visible_among(
    conn: AsyncConnection, scope: RecallScope, entry_ids: Sequence[int]
) -> list[Any]:
    consenting = await _consenting(conn, scope.person_ids)
    rows = await conn.execute(
        select(*_VISIBILITY_COLUMNS).where(MemoryEntry.id.in_(entry_ids), _active(scope))
    )
    return [r for r in rows if _may_see(r, scope, consenting)]


async def _records(conn: AsyncConnection, entry_ids: Sequence[int]) -> dict[int, MemoryRecord]:
    if not entry_ids:
        return {}
    rows = await conn.execute(select(*_RECORD_COLUMNS).where(MemoryEntry.id.in_(entry_ids)))
    return {int(r.id): to_record(r) for r in rows}
