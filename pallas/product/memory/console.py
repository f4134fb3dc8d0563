"""What memory adds to the console: a person's facts on their page, and forgetting one
(docs/console.md). Plugged through the seam, so with memory off the page shows none."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from fastapi import APIRouter

from pallas.platform.http_params import RowId
from pallas.product.memory.store import MemoryStore
from pallas.product.ports import PersonFacet

PAGE_FACTS = 100


def memory_routes(store: MemoryStore, clock: Callable[[], datetime]) -> APIRouter:
    router = APIRouter()

    @router.post("/memory/{entry_id}/forget", tags=["persons"])
    async def forget(entry_id: RowId) -> dict[str, bool]:
        record = await store.forget(entry_id, clock(), actor="console")
        return {"forgotten": record is not None}

    return router


def memory_facet(store: MemoryStore) -> PersonFacet:
    async def facts(person_id: int, bots: Sequence[str]) -> Mapping[str, Any]:
        kept = await store.entries(person_id=person_id, limit=PAGE_FACTS)
        return {"facts": [{"id": f.id, "text": f.text, "kind": f.kind.value} for f in kept]}

    return facts
