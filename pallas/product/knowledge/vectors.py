"""Vectors for the knowledge folder, when an embedding model is configured and answering
(docs/knowledge.md, "Vectors").

  after a scan: passages with no vector of the model, embedded EMBED_BATCH at a time, at most
  EMBED_PER_SCAN a scan (the rest at the next one) -> `knowledge_vector`
  knowledge.search: the keyword passages, and the question's vector against the scopes'
  vectors (brute force over a matrix kept in memory); merged so that a passage matching the
  question's rare exact terms is never lost to the vector ranking: those come first, the
  rest by reciprocal rank fusion of the two rankings

The automatic block of a turn stays keyword-only: it costs no embedding call per turn. A call
that fails or takes longer than QUERY_TIMEOUT_S leaves the search to the keywords.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from loguru import logger
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.vectors import pack, top_by_cosine
from pallas.product.knowledge.recall import AUTO_COVERAGE
from pallas.product.knowledge.store import KnowledgeStore, Passage
from pallas.product.knowledge.tables import KnowledgeChunk, KnowledgeDoc, KnowledgeVector
from pallas.providers.catalog import ModelType
from pallas.providers.manager import ModelManager
from pallas.providers.results import CallTag, Purpose
from pallas.store.database import Database

EMBED_BATCH = 32
EMBED_PER_SCAN = 2000
QUERY_TIMEOUT_S = 3.0
FUSION_K = 60  # reciprocal rank fusion's constant


def fused(keyword: Sequence[Passage], nearest: Sequence[int], limit: int) -> list[int]:
    """The passages' order (pure): strong keyword matches first, as found; then the rest of
    both rankings by reciprocal rank fusion."""
    strong = [p.chunk_id for p in keyword if p.coverage >= AUTO_COVERAGE]
    scores: dict[int, float] = {}
    for ranking in ([p.chunk_id for p in keyword], list(nearest)):
        for rank, chunk_id in enumerate(ranking):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1 / (FUSION_K + rank + 1)
    rest = sorted((c for c in scores if c not in strong), key=lambda c: (-scores[c], c))
    return [*strong, *rest][:limit]


class KnowledgeVectors:
    def __init__(self, engine: AsyncEngine, models: ModelManager, store: KnowledgeStore) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()
        self._models = models
        self._store = store
        self._matrix: tuple[int, str, list[tuple[int, str, bytes]]] | None = None

    @property
    def configured(self) -> bool:
        return self._models.has(ModelType.EMBEDDING)

    def _model(self) -> str:
        return self._models.candidates(ModelType.EMBEDDING)[0].name

    async def fill(self) -> int:
        """Embed passages that have no vector of the model yet; how many were embedded."""
        if not self.configured:
            return 0
        model = self._model()
        missing = await self._missing(model)
        done = 0
        for start in range(0, len(missing), EMBED_BATCH):
            batch = missing[start : start + EMBED_BATCH]
            try:
                result = await self._models.embed([text for _, _, text in batch],
                                                  tag=CallTag(Purpose.EMBEDDING))  # fmt: skip
            except Exception as exc:  # any provider failure: the next scan tries again
                logger.warning("knowledge: passages not embedded: {!r}", exc)
                break
            pairs = zip(batch, result.vectors, strict=False)
            rows = [{"chunk_id": cid, "model": result.model, "scope": scope,
                     "vector": pack(vector)} for (cid, scope, _), vector in pairs]  # fmt: skip
            async with self._writes.begin() as conn:
                await conn.execute(insert(KnowledgeVector), rows)
            done += len(rows)
        if done:
            self._matrix = None
            logger.info("knowledge: {} passage(s) embedded with {}", done, model)
        return done

    async def _missing(self, model: str) -> list[tuple[int, str, str]]:
        have = select(KnowledgeVector.chunk_id).where(KnowledgeVector.model == model)
        query = (select(KnowledgeChunk.id, KnowledgeDoc.scope, KnowledgeChunk.heading,
                        KnowledgeChunk.text)
                 .join(KnowledgeDoc, KnowledgeDoc.id == KnowledgeChunk.doc_id)
                 .where(KnowledgeChunk.id.not_in(have))
                 .order_by(KnowledgeChunk.id).limit(EMBED_PER_SCAN))  # fmt: skip
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [(int(r.id), r.scope, f"{r.heading}\n{r.text}".strip()) for r in rows]

    async def search(self, text: str, scopes: Sequence[str], limit: int) -> list[Passage]:
        """Keyword passages, merged with the nearest vectors when there are any."""
        keyword = await self._store.search(text, scopes, limit)
        if not self.configured:
            return keyword
        nearest = await self._nearest(text, scopes, limit)
        if not nearest:
            return keyword
        order = fused(keyword, nearest, limit)
        known = {p.chunk_id: p for p in keyword}
        found = await self._store.passages([c for c in order if c not in known])
        passages = {**found, **known}
        return [passages[c] for c in order if c in passages]

    async def _nearest(self, text: str, scopes: Sequence[str], limit: int) -> list[int]:
        rows = await self._rows()
        usable = [(cid, blob) for cid, scope, blob in rows if scope in scopes]
        if not usable:
            return []
        try:
            async with asyncio.timeout(QUERY_TIMEOUT_S):
                result = await self._models.embed([text[:500]], tag=CallTag(Purpose.EMBEDDING))
        except Exception as exc:  # the keywords answer alone
            logger.info("knowledge: the question was not embedded: {!r}", exc)
            return []
        nearest = await asyncio.to_thread(top_by_cosine, result.vectors[0], usable, limit)
        return [cid for cid, _ in nearest]

    async def _rows(self) -> list[tuple[int, str, bytes]]:
        """The model's vectors, read once per change of the index or of the vectors."""
        model, generation = self._model(), self._store.generation
        if self._matrix is not None and self._matrix[:2] == (generation, model):
            return self._matrix[2]
        query = select(KnowledgeVector.chunk_id, KnowledgeVector.scope,
                       KnowledgeVector.vector).where(KnowledgeVector.model == model)  # fmt: skip
        async with self._engine.connect() as conn:
            rows = [(int(r.chunk_id), r.scope, bytes(r.vector))
                    for r in (await conn.execute(query)).all()]  # fmt: skip
        self._matrix = (generation, model, rows)
        return rows
