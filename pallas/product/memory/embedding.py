"""Embeddings for memory, when an embedding model is configured and answering.

Vectors are only comparable within one model and one size. The size a model answers with is
learned from the vectors already stored for it; an answer of another size (a model swapped
behind the same name, a proxy that truncates) is refused, and the caller falls back to
keyword recall. A call that fails or takes longer than the timeout does the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from loguru import logger
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.vectors import pack
from pallas.product.memory.store import MemoryStore
from pallas.product.memory.tables import MemoryEntry
from pallas.providers.catalog import ModelType
from pallas.providers.manager import ModelManager
from pallas.providers.results import CallTag, Purpose


@dataclass(frozen=True)
class Embedded:
    model: str
    dim: int
    vectors: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class EmbedFailed:
    reason: str  # English, for the trace and the log


class Embedder:
    def __init__(
        self,
        models: ModelManager,
        store: MemoryStore,
        engine: AsyncEngine,
        timeout_s: Callable[[], float],
    ) -> None:
        self._models = models
        self._store = store
        self._engine = engine
        self._timeout_s = timeout_s  # asked at every call: the console may change it
        self._dims: dict[str, int] = {}

    @property
    def configured(self) -> bool:
        return self._models.has(ModelType.EMBEDDING)

    async def embed(
        self, texts: Sequence[str], stream_id: int | None = None
    ) -> Embedded | EmbedFailed:
        timeout_s = self._timeout_s()
        try:
            async with asyncio.timeout(timeout_s):
                result = await self._models.embed(
                    list(texts), tag=CallTag(Purpose.EMBEDDING, stream_id=stream_id)
                )
        except TimeoutError:
            return self._failed(f"no answer within {timeout_s:g} s")
        except Exception as exc:  # any provider failure: recall goes on by keyword
            return self._failed(f"{type(exc).__name__}: {exc}"[:200])
        sizes = {len(v) for v in result.vectors}
        if len(sizes) != 1 or len(result.vectors) != len(texts):
            return self._failed(f"vectors of sizes {sorted(sizes)} for {len(texts)} texts")
        dim = sizes.pop()
        known = await self._known_dim(result.model)
        if known is not None and known != dim:
            return self._failed(
                f"{result.model} answered {dim} dimensions, stored vectors have {known}"
            )
        self._dims[result.model] = dim
        return Embedded(result.model, dim, result.vectors)

    async def embed_entries(self, entry_ids: Sequence[int]) -> int:
        """Give these entries a vector; best effort (a failure leaves them keyword-only)."""
        records = [r for i in entry_ids if (r := await self._store.get(i)) is not None]
        if not records or not self.configured:
            return 0
        answer = await self.embed([r.text for r in records])
        if isinstance(answer, EmbedFailed):
            return 0
        for record, vector in zip(records, answer.vectors, strict=True):
            await self._store.set_embedding(record.id, answer.model, pack(vector), answer.dim)
        return len(records)

    async def _known_dim(self, model: str) -> int | None:
        if model in self._dims:
            return self._dims[model]
        query = (
            select(MemoryEntry.embedding_dim)
            .where(MemoryEntry.embedding_model == model)
            .group_by(MemoryEntry.embedding_dim)
            .order_by(func.count().desc())
            .limit(1)
        )
        async with self._engine.connect() as conn:
            value = await conn.scalar(query)
        return int(value) if value else None

    @staticmethod
    def _failed(reason: str) -> EmbedFailed:
        logger.warning("memory: embedding failed, recall falls back to keywords: {}", reason)
        return EmbedFailed(reason)
