"""Reading memory back for a turn: keyword recall over the term index, and the stored vectors
for vector recall. Both are restricted to who is present: the chat's own entries and the
facts of the people in the conversation, those learned elsewhere only with consent."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import bindparam, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.elements import ColumnElement

from pallas.core.terms import index_terms
from pallas.core.vectors import top_by_cosine
from pallas.product.memory.store import (
    MemoryKind,
    MemoryRecord,
    MemoryStatus,
    owner_key,
    to_record,
)
from pallas.product.memory.tables import MemoryConsent, MemoryEntry
from pallas.store.sql import fetch_rows

MAX_QUERY_TERMS = 64
CANDIDATES_PER_HIT = 2  # best-scored entries loaded per wanted hit (some may not be visible)
VECTOR_FLOOR = 0.3  # cosine below this is not a match, whatever the rank


@dataclass(frozen=True)
class RecallScope:
    stream_id: int
    person_ids: tuple[int, ...]  # present: recent speakers and the sender
    kinds: tuple[MemoryKind, ...] = (MemoryKind.FACT, MemoryKind.EPISODE)


@dataclass(frozen=True)
class Recalled:
    record: MemoryRecord
    score: float  # 0..1: the share of a query's terms the entry holds (best query)


@dataclass(frozen=True)
class QueryVectors:
    """The queries embedded by one model: only that model's vectors of this size compare."""

    model: str
    dim: int
    vectors: Sequence[Sequence[float]]


@dataclass(frozen=True)
class RecallResult:
    hits: list[Recalled]
    vectors_read: int = 0  # stored vectors compared (0 when no vector search ran)


async def keyword_recall(
    engine: AsyncEngine, queries: Sequence[str], scope: RecallScope, limit: int
) -> list[Recalled]:
    return (await recall_entries(engine, queries, scope, limit)).hits


async def recall_entries(
    engine: AsyncEngine,
    queries: Sequence[str],
    scope: RecallScope,
    limit: int,
    vectors: QueryVectors | None = None,
    always_about: Sequence[int] = (),
) -> RecallResult:
    """The best `limit` visible entries for the queries, on one connection: keyword scores
    (the share of a query's terms an entry holds, best query) and, with `vectors`, cosine
    similarity, each entry once with its best score. Room left is filled with the newest facts
    learned here about `always_about` (the people talking to the bot), then the chat's newest
    episode, score 0: what anyone remembers about whoever is speaking and about what happened
    here last, whatever the words."""
    if limit <= 0:
        return RecallResult([])
    async with engine.connect() as conn:
        scores = await _keyword_scores(conn, queries, scope)
        read = 0
        if vectors is not None:
            rows = await _vector_rows(conn, scope, vectors)
            read = len(rows)
            for query in vectors.vectors:
                for entry_id, score in top_by_cosine(query, rows, limit):
                    if score >= VECTOR_FLOOR and score > scores.get(entry_id, 0.0):
                        scores[entry_id] = score
        best = sorted(scores, key=lambda e: -scores[e])[: limit * CANDIDATES_PER_HIT]
        records = await _visible_records(conn, scope, best)
        records.sort(key=lambda r: (-scores[r.id], -r.confidence, -r.id))
        hits = [Recalled(r, scores[r.id]) for r in records[:limit]]
        if len(hits) < limit and always_about:
            about = MemoryEntry.person_id.in_(always_about)
            hits += await _newest(conn, scope, about, MemoryKind.FACT, limit, hits)
        if len(hits) < limit and MemoryKind.EPISODE in scope.kinds:
            group = MemoryEntry.person_id.is_(None)
            hits += await _newest(conn, scope, group, MemoryKind.EPISODE, 1, hits)
    return RecallResult(hits[:limit], read)


async def _newest(
    conn: AsyncConnection,
    scope: RecallScope,
    who: ColumnElement[bool],
    kind: MemoryKind,
    count: int,
    have: Sequence[Recalled],
) -> list[Recalled]:
    """The chat's newest active entries of one kind about `who`, not already in `have`: what
    anyone remembers about whoever is speaking, or what happened here last, whatever the words."""
    query = (
        select(*_RECORD_COLUMNS)
        .where(
            MemoryEntry.stream_id == scope.stream_id,
            who,
            MemoryEntry.kind == kind.value,
            MemoryEntry.status == MemoryStatus.ACTIVE.value,
        )
        .order_by(MemoryEntry.last_seen_at.desc())
        .limit(count + len(have))
    )
    known = {hit.record.id for hit in have}
    rows = [to_record(r) for r in await conn.execute(query)]
    return [Recalled(r, 0.0) for r in rows if r.id not in known][:count]


def _query_terms(query: str) -> frozenset[str]:
    terms = index_terms(query)
    return frozenset(sorted(terms)[:MAX_QUERY_TERMS]) if len(terms) > MAX_QUERY_TERMS else terms


async def _keyword_scores(
    conn: AsyncConnection, queries: Sequence[str], scope: RecallScope
) -> dict[int, float]:
    wanted = [terms for q in queries if (terms := _query_terms(q))]
    every_term = sorted(set().union(*wanted)) if wanted else []
    if not every_term:
        return {}
    owners = [owner_key(scope.stream_id, None), *(owner_key(0, p) for p in scope.person_ids)]
    rows = await fetch_rows(conn, _TERMS.bindparams(owners=owners, terms=every_term))
    held: dict[int, set[str]] = defaultdict(set)
    for entry_id, term in rows:
        held[int(entry_id)].add(term)
    return {e: max(len(have & q) / len(q) for q in wanted) for e, have in held.items()}


async def _vector_rows(
    conn: AsyncConnection, scope: RecallScope, vectors: QueryVectors
) -> list[tuple[int, bytes]]:
    """(entry id, vector) of the visible entries in the queries' space: one range of
    memory_vector per owner present (the chat, each person), the chat's own entries and a
    person's from elsewhere when they consented. Only active entries have a vector."""
    owners = [owner_key(scope.stream_id, None), *(owner_key(0, p) for p in scope.person_ids)]
    query = _VECTORS.bindparams(
        owners=owners,
        model=vectors.model,
        dim=vectors.dim,
        kinds=[k.value for k in scope.kinds],
        stream_id=scope.stream_id,
        present=list(scope.person_ids or (-1,)),
    )
    return [(int(entry_id), bytes(blob)) for entry_id, blob in await fetch_rows(conn, query)]


_RECORD_COLUMNS = list(MemoryEntry.__table__.c)
# The two reads of many rows, written out once: built from expressions, each call would spend
# more on building and compiling the statement than the database spends running it.
_TERMS = text(
    "SELECT entry_id, term FROM memory_term WHERE owner IN :owners AND term IN :terms"
).bindparams(bindparam("owners", expanding=True), bindparam("terms", expanding=True))
_VECTORS = text(
    "SELECT entry_id, vector FROM memory_vector"
    " WHERE owner IN :owners AND model = :model AND dim = :dim AND kind IN :kinds"
    " AND (stream_id = :stream_id OR (kind = 'fact' AND owner IN ("
    "SELECT 'p' || CAST(person_id AS VARCHAR(24)) FROM memory_consent"
    " WHERE person_id IN :present)))"
).bindparams(
    bindparam("owners", expanding=True),
    bindparam("kinds", expanding=True),
    bindparam("present", expanding=True),
)


def _active(scope: RecallScope) -> ColumnElement[bool]:
    return (MemoryEntry.status == MemoryStatus.ACTIVE.value) & MemoryEntry.kind.in_(
        [k.value for k in scope.kinds]
    )


def _visible(scope: RecallScope) -> ColumnElement[bool]:
    """Active entries of the wanted kinds that this chat may see: its own, about the group or
    a present person, and a present person's facts from elsewhere when they consented. A
    filter, never the access path: every read reaches entries by id or by person first."""
    present = scope.person_ids or (-1,)
    consented = select(MemoryConsent.person_id).where(MemoryConsent.person_id.in_(present))
    here = (MemoryEntry.stream_id == scope.stream_id) & (
        MemoryEntry.person_id.is_(None) | MemoryEntry.person_id.in_(present)
    )
    elsewhere = (
        (MemoryEntry.kind == MemoryKind.FACT.value)
        & MemoryEntry.person_id.in_(present)
        & MemoryEntry.person_id.in_(consented)
    )
    return _active(scope) & (here | elsewhere)


async def _visible_records(
    conn: AsyncConnection, scope: RecallScope, entry_ids: Sequence[int]
) -> list[MemoryRecord]:
    if not entry_ids:
        return []
    query = select(*_RECORD_COLUMNS).where(MemoryEntry.id.in_(entry_ids), _visible(scope))
    return [to_record(r) for r in await conn.execute(query)]
