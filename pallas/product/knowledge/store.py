"""The knowledge index in the store: a document's passages replaced in one transaction, and
the keyword search over the passages of the chats' own scopes (docs/knowledge.md).

Search weighs each query term by how rare it is among the passages in scope (idf), so an
exact rare term ("31415", a name) decides the ranking; terms in more than COMMON_SHARE of
the passages say little and are left out unless nothing else is asked.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.core.terms import index_terms
from pallas.product.knowledge.chunking import Chunk
from pallas.product.knowledge.tables import KnowledgeChunk, KnowledgeDoc, KnowledgeTerm
from pallas.store.database import Database

COMMON_SHARE = 0.3
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


class KnowledgeStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()

    async def docs(self) -> list[Doc]:
        query = select(*KnowledgeDoc.__table__.c).order_by(KnowledgeDoc.scope, KnowledgeDoc.path)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [Doc(r.id, r.path, r.scope, r.sha256, r.size, r.status, r.reason, r.chunks,
                    r.indexed_at) for r in rows]  # fmt: skip

    async def put(self, file: DocFile, chunks: Sequence[Chunk], reason: str,
                  now: datetime) -> None:  # fmt: skip
        """The file's passages (none, with `reason`: skipped) in place of what it had."""
        async with self._writes.begin() as conn:
            await _drop(conn, [file.path])
            row = {"path": file.path, "scope": file.scope, "sha256": file.sha256,
                   "size": file.size, "status": "skipped" if reason else "indexed",
                   "reason": reason[:200], "chunks": len(chunks), "indexed_at": now}  # fmt: skip
            doc_id = (await conn.execute(insert(KnowledgeDoc).values(**row)
                                         .returning(KnowledgeDoc.id))).scalar_one()  # fmt: skip
            await _index(conn, doc_id, file.scope, chunks)

    async def drop(self, paths: Sequence[str]) -> None:
        """Forget files that are gone from the folder."""
        if paths:
            async with self._writes.begin() as conn:
                await _drop(conn, paths)

    async def chunks_of(self, doc_id: int, limit: int = 200) -> list[tuple[str, str]]:
        query = (select(KnowledgeChunk.heading, KnowledgeChunk.text)
                 .where(KnowledgeChunk.doc_id == doc_id).order_by(KnowledgeChunk.ord)
                 .limit(limit))  # fmt: skip
        async with self._engine.connect() as conn:
            return [(r.heading, r.text) for r in (await conn.execute(query)).all()]

    async def search(self, text: str, scopes: Sequence[str], limit: int = 5) -> list[Passage]:
        """The passages of these scopes that match `text` best, best first."""
        terms = sorted(index_terms(text))
        if not terms:
            return []
        async with self._engine.connect() as conn:
            weights = await _weights(conn, terms, scopes)
            if not weights:
                return []
            scores = await _scores(conn, weights, scopes)
            best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
            found = await _passages(conn, [chunk for chunk, _ in best])
        total = sum(weights.values())
        return [Passage(cid, *found[cid], score, min(1.0, score / total))
                for cid, score in best if cid in found]  # fmt: skip


async def _drop(conn: AsyncConnection, paths: Sequence[str]) -> None:
    docs = select(KnowledgeDoc.id).where(KnowledgeDoc.path.in_(paths))
    chunks = select(KnowledgeChunk.id).where(KnowledgeChunk.doc_id.in_(docs))
    await conn.execute(delete(KnowledgeTerm).where(KnowledgeTerm.chunk_id.in_(chunks)))
    await conn.execute(delete(KnowledgeChunk).where(KnowledgeChunk.doc_id.in_(docs)))
    await conn.execute(delete(KnowledgeDoc).where(KnowledgeDoc.path.in_(paths)))


async def _index(conn: AsyncConnection, doc_id: int, scope: str, chunks: Sequence[Chunk]) -> None:
    terms: list[dict[str, object]] = []
    for n, chunk in enumerate(chunks):
        chunk_id = (await conn.execute(
            insert(KnowledgeChunk).values(doc_id=doc_id, ord=n, heading=chunk.heading[:300],
                                          text=chunk.text).returning(KnowledgeChunk.id)
        )).scalar_one()  # fmt: skip
        found = index_terms(f"{chunk.heading}\n{chunk.text}")
        terms += [{"term": term, "chunk_id": chunk_id, "scope": scope} for term in found]
    for start in range(0, len(terms), ROWS_PER_INSERT):
        await conn.execute(insert(KnowledgeTerm), terms[start : start + ROWS_PER_INSERT])


async def _weights(conn: AsyncConnection, terms: list[str],
                   scopes: Sequence[str]) -> dict[str, float]:  # fmt: skip
    """Each query term's idf among the scopes' passages; common ones left out when rarer
    ones are there."""
    in_scope = KnowledgeTerm.scope.in_(scopes)
    counted = select(KnowledgeTerm.term, func.count()).where(
        KnowledgeTerm.term.in_(terms), in_scope).group_by(KnowledgeTerm.term)  # fmt: skip
    passages = select(func.sum(KnowledgeDoc.chunks)).where(KnowledgeDoc.scope.in_(scopes))
    df = {term: int(n) for term, n in (await conn.execute(counted)).all()}
    if not df:
        return {}
    total = int((await conn.execute(passages)).scalar() or 0) or 1
    rare = {term: n for term, n in df.items() if n <= max(1, COMMON_SHARE * total)}
    return {term: math.log(1 + total / n) for term, n in (rare or df).items()}


async def _scores(conn: AsyncConnection, weights: dict[str, float],
                  scopes: Sequence[str]) -> dict[int, float]:  # fmt: skip
    query = select(KnowledgeTerm.chunk_id, KnowledgeTerm.term).where(
        KnowledgeTerm.term.in_(list(weights)), KnowledgeTerm.scope.in_(scopes))  # fmt: skip
    scores: dict[int, float] = defaultdict(float)
    for chunk_id, term in (await conn.execute(query)).all():
        scores[int(chunk_id)] += weights[term]
    return scores


async def _passages(conn: AsyncConnection, ids: list[int]) -> dict[int, tuple[str, str, str]]:
    query = (select(KnowledgeChunk.id, KnowledgeDoc.path, KnowledgeChunk.heading,
                    KnowledgeChunk.text)
             .join(KnowledgeDoc, KnowledgeDoc.id == KnowledgeChunk.doc_id)
             .where(KnowledgeChunk.id.in_(ids)))  # fmt: skip
    return {int(r.id): (r.path, r.heading, r.text) for r in (await conn.execute(query)).all()}
