"""The knowledge index in the store: a document's passages replaced in one transaction, and
the keyword search over the passages of the chats' own scopes (docs/knowledge.md).

Search weighs each query term by how rare it is among the passages in scope (idf), so an
exact rare term ("31415", a name) decides the ranking; terms in more than COMMON_SHARE of
the passages say little and are left out unless nothing else is asked. The counts behind
the weights are kept in memory, counted again after a scan changed the index.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import case, delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.core.terms import index_terms
from pallas.product.knowledge.chunking import Chunk
from pallas.product.knowledge.tables import (
    KnowledgeChunk,
    KnowledgeDoc,
    KnowledgeTerm,
    KnowledgeVector,
)
from pallas.store.database import Database

MAX_QUERY_CHARS = 500  # a long paste is searched by its beginning
COMMON_SHARE = 0.1
FALLBACK = 3
FALLBACK_PASSAGES = 1500  # a common term in more passages than this finds nothing worth it
ROWS_PER_INSERT = 5000


@dataclass(frozen=True)
class DocFile:
    path: str  # relative to the folder
    scope: str  # "" every chat; else a group's number
    sha256: str
    size: int


@dataclass(frozen=True)
class Doc:
    id: int
    path: str
    scope: str
    sha256: str
    size: int
    status: str
    reason: str
    chunks: int
    indexed_at: datetime


@dataclass(frozen=True)
class Passage:
    chunk_id: int
    path: str
    heading: str
    text: str
    score: float  # the matched terms' weight
    coverage: float  # the share of the query's weight it matched (0..1)
    matched: int  # how many of the query's terms it holds


class KnowledgeStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()
        self._generation = 0  # moved on by every change of the index
        self._counted: tuple[int, dict[str, Frequencies]] | None = None  # by scope, as of

    async def docs(self) -> list[Doc]:
        query = select(*KnowledgeDoc.__table__.c).order_by(KnowledgeDoc.scope, KnowledgeDoc.path)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [Doc(r.id, r.path, r.scope, r.sha256, r.size, r.status, r.reason, r.chunks,
                    r.indexed_at) for r in rows]  # fmt: skip

    async def doc(self, doc_id: int) -> Doc | None:
        return next((d for d in await self.docs() if d.id == doc_id), None)

    async def put(self, file: DocFile, chunks: Sequence[Chunk], reason: str,
                  now: datetime) -> None:  # fmt: skip
        """The file's passages (none, with `reason`: skipped) in place of what it had."""
        terms = await asyncio.to_thread(lambda: [index_terms(f"{c.heading}\n{c.text}")
                                                 for c in chunks])  # fmt: skip
        async with self._writes.begin() as conn:
            await _drop(conn, [file.path])
            row = {"path": file.path, "scope": file.scope, "sha256": file.sha256,
                   "size": file.size, "status": "skipped" if reason else "indexed",
                   "reason": reason[:200], "chunks": len(chunks), "indexed_at": now}  # fmt: skip
            doc_id = (await conn.execute(insert(KnowledgeDoc).values(**row)
                                         .returning(KnowledgeDoc.id))).scalar_one()  # fmt: skip
            await _index(conn, doc_id, file.scope, chunks, terms)
        self._generation += 1

    async def drop(self, paths: Sequence[str]) -> None:
        """Forget files that are gone from the folder."""
        if paths:
            async with self._writes.begin() as conn:
                await _drop(conn, paths)
            self._generation += 1

    async def chunks_of(self, doc_id: int, limit: int = 200) -> list[tuple[str, str]]:
        query = (select(KnowledgeChunk.heading, KnowledgeChunk.text)
                 .where(KnowledgeChunk.doc_id == doc_id).order_by(KnowledgeChunk.ord)
                 .limit(limit))  # fmt: skip
        async with self._engine.connect() as conn:
            return [(r.heading, r.text) for r in (await conn.execute(query)).all()]

    async def search(self, text: str, scopes: Sequence[str], limit: int = 5) -> list[Passage]:
        """The passages of these scopes that match `text` best, best first."""
        terms = sorted(index_terms(text[:MAX_QUERY_CHARS]))
        if not terms:
            return []
        frequencies = await self._frequencies(scopes, terms)
        weights = term_weights(terms, frequencies)
        if not weights:
            return []
        async with self._engine.connect() as conn:
            best = await _best(conn, weights, scopes, limit)
            found = await _passages(conn, [chunk for chunk, *_ in best])
        total = query_weight(terms, weights, frequencies)
        return [Passage(cid, *found[cid], score, min(1.0, score / total), matched)
                for cid, score, matched in best if cid in found]  # fmt: skip

    @property
    def generation(self) -> int:
        """Moves on with every change of the index (vectors' caches follow it)."""
        return self._generation

    async def passages(self, ids: Sequence[int]) -> dict[int, Passage]:
        """These passages as found by something other than their terms (a vector)."""
        if not ids:
            return {}
        async with self._engine.connect() as conn:
            found = await _passages(conn, list(ids))
        return {cid: Passage(cid, *found[cid], 0.0, 0.0, 0) for cid in ids if cid in found}

    async def warm(self) -> None:
        """Count the terms when the index changed since they were last counted: after a scan,
        off the reply path. A search between a change and this uses the last counts."""
        generation = self._generation
        if self._counted is None or self._counted[0] != generation:
            self._counted = (generation, await _count_terms(self._engine))

    async def _frequencies(self, scopes: Sequence[str], terms: Sequence[str]) -> Frequencies:
        if self._counted is None:  # the first search before any scan: counted once here
            await self.warm()
        assert self._counted is not None
        merged = Frequencies()
        for scope in scopes:
            found = self._counted[1].get(scope)
            if found is not None:
                merged.passages += found.passages
                for term in terms:
                    merged.terms[term] += found.terms.get(term, 0)
        return merged


@dataclass
class Frequencies:
    """How many passages there are, and how many hold each term (a scope's, or several)."""

    passages: int = 0
    terms: Counter[str] = field(default_factory=Counter)


def query_weight(terms: Sequence[str], weights: dict[str, float],
                 frequencies: Frequencies) -> float:  # fmt: skip
    """What a passage matching the whole question would score (pure): the kept terms'
    weights, and each term the index has never seen at the highest weight, so a passage
    sharing one word with ordinary talk does not count as answering it."""
    unseen = sum(1 for term in terms if not frequencies.terms[term])
    return sum(weights.values()) + unseen * math.log(1 + max(1, frequencies.passages))


def term_weights(terms: Sequence[str], frequencies: Frequencies) -> dict[str, float]:
    """Each query term's idf (pure). Terms in more than COMMON_SHARE of the passages say
    little and are left out; a question of only such terms keeps its FALLBACK rarest, those
    in at most FALLBACK_PASSAGES passages (a small folder's common words still count)."""
    total = max(1, frequencies.passages)
    found = {term: frequencies.terms[term] for term in terms if frequencies.terms[term]}
    rare = {term: n for term, n in found.items() if n <= max(1, COMMON_SHARE * total)}
    fallback = sorted((item for item in found.items() if item[1] <= FALLBACK_PASSAGES),
                      key=lambda item: item[1])[:FALLBACK]  # fmt: skip
    kept = rare or dict(fallback)
    return {term: math.log(1 + total / n) for term, n in kept.items()}


async def _count_terms(engine: AsyncEngine) -> dict[str, Frequencies]:
    counted = (select(KnowledgeTerm.scope, KnowledgeTerm.term, func.count())
               .group_by(KnowledgeTerm.scope, KnowledgeTerm.term))  # fmt: skip
    passages = (select(KnowledgeDoc.scope, func.sum(KnowledgeDoc.chunks))
                .group_by(KnowledgeDoc.scope))  # fmt: skip
    by_scope: dict[str, Frequencies] = defaultdict(Frequencies)
    async with engine.connect() as conn:
        for scope, term, n in (await conn.execute(counted)).all():
            by_scope[scope].terms[term] = int(n)
        for scope, n in (await conn.execute(passages)).all():
            by_scope[scope].passages = int(n or 0)
    return dict(by_scope)


async def _drop(conn: AsyncConnection, paths: Sequence[str]) -> None:
    docs = select(KnowledgeDoc.id).where(KnowledgeDoc.path.in_(paths))
    chunks = select(KnowledgeChunk.id).where(KnowledgeChunk.doc_id.in_(docs))
    await conn.execute(delete(KnowledgeTerm).where(KnowledgeTerm.chunk_id.in_(chunks)))
    await conn.execute(delete(KnowledgeVector).where(KnowledgeVector.chunk_id.in_(chunks)))
    await conn.execute(delete(KnowledgeChunk).where(KnowledgeChunk.doc_id.in_(docs)))
    await conn.execute(delete(KnowledgeDoc).where(KnowledgeDoc.path.in_(paths)))


async def _index(conn: AsyncConnection, doc_id: int, scope: str, chunks: Sequence[Chunk],
                 terms: Sequence[frozenset[str]]) -> None:  # fmt: skip
    """The passages in one statement (their ids back in order), then their terms."""
    if not chunks:
        return
    rows = [{"doc_id": doc_id, "ord": n, "heading": c.heading[:300], "text": c.text}
            for n, c in enumerate(chunks)]  # fmt: skip
    made = await conn.execute(insert(KnowledgeChunk).returning(
        KnowledgeChunk.id, sort_by_parameter_order=True), rows)  # fmt: skip
    ids = [int(row.id) for row in made.all()]
    filed = [{"term": term, "chunk_id": chunk_id, "scope": scope}
             for chunk_id, found in zip(ids, terms, strict=True) for term in found]  # fmt: skip
    for start in range(0, len(filed), ROWS_PER_INSERT):
        await conn.execute(insert(KnowledgeTerm), filed[start : start + ROWS_PER_INSERT])


async def _best(conn: AsyncConnection, weights: dict[str, float], scopes: Sequence[str],
                limit: int) -> list[tuple[int, float, int]]:  # fmt: skip
    """The passages with the most weight of the query's terms, summed by the database."""
    weight = case(*((KnowledgeTerm.term == term, value) for term, value in weights.items()),
                  else_=0.0)  # fmt: skip
    score = func.sum(weight).label("score")
    query = (select(KnowledgeTerm.chunk_id, score, func.count().label("matched"))
             .where(KnowledgeTerm.term.in_(list(weights)), KnowledgeTerm.scope.in_(scopes))
             .group_by(KnowledgeTerm.chunk_id)
             .order_by(score.desc(), KnowledgeTerm.chunk_id).limit(limit))  # fmt: skip
    return [(int(cid), float(value), int(matched))
            for cid, value, matched in (await conn.execute(query)).all()]  # fmt: skip


async def _passages(conn: AsyncConnection, ids: list[int]) -> dict[int, tuple[str, str, str]]:
    query = (select(KnowledgeChunk.id, KnowledgeDoc.path, KnowledgeChunk.heading,
                    KnowledgeChunk.text)
             .join(KnowledgeDoc, KnowledgeDoc.id == KnowledgeChunk.doc_id)
             .where(KnowledgeChunk.id.in_(ids)))  # fmt: skip
    return {int(r.id): (r.path, r.heading, r.text) for r in (await conn.execute(query)).all()}
