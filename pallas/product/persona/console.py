"""What persona adds to the console (docs/console.md): a person's favorability, notes and
standing in each chat on their page; lifting a silence or a blacklisting, dropping a note,
resetting a favorability (the page's actions), an account's promises. Plugged
through the seam, so with persona off the page shows none."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Query
from loguru import logger
from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.numbers import read_db_id
from pallas.platform.http_params import RowId, RowIdQuery
from pallas.product.persona.promise_store import PromiseStore
from pallas.product.persona.store import PersonaStore
from pallas.product.persona.tables import Blacklist, Favorability, RageState
from pallas.product.ports import PersonAction, PersonFacet


@dataclass(frozen=True)
class Standing:
    """One person's rage and blacklist state in one chat."""

    stream_id: int
    pressure: float
    silenced_until: datetime | None
    blacklisted: bool


def persona_routes(
    store: PersonaStore, promises: PromiseStore, clock: Callable[[], datetime]
) -> APIRouter:
    router = APIRouter()

    @router.post("/persons/{person_id}/lift", tags=["persons"])
    async def lift(person_id: RowId, stream_id: RowIdQuery) -> dict[str, bool]:
        return {"lifted": await store.lift(stream_id, person_id, clock())}

    @router.delete("/notes/{note_id}", tags=["persons"])
    async def drop_note(note_id: RowId) -> dict[str, bool]:
        return {"dropped": await store.drop_note(note_id)}

    @router.get("/promises", tags=["persons"])
    async def get_promises(self_id: str = Query(..., max_length=64)) -> list[dict[str, Any]]:
        return [asdict(p) for p in await promises.of_account(self_id)]

    return router


def persona_facet(
    engine: AsyncEngine, store: PersonaStore
) -> PersonFacet:
    async def facet(person_id: int, bots: Sequence[str]) -> Mapping[str, Any]:
        scores = await favorability_of(engine, person_id)
        notes = []
        for self_id in scores or dict.fromkeys(bots, 0.0):
            kept = await store.notes(self_id, [person_id])
            notes += [asdict(note) | {"self_id": self_id} for note in kept]
        return {
            "favorability": scores,
            "notes": notes,
            "standings": [asdict(s) for s in await standings(engine, person_id)],
        }

    return facet


async def favorability_of(engine: AsyncEngine, person_id: int) -> dict[str, float]:
    """Bot account -> score."""
    query = select(Favorability.self_id, Favorability.score).where(
        Favorability.person_id == person_id
    )
    async with engine.connect() as conn:
        return {self_id: float(score) for self_id, score in await conn.execute(query)}


async def standings(engine: AsyncEngine, person_id: int) -> list[Standing]:
    """Rage and the blacklist, per chat where there is any."""
    listed = and_(
        Blacklist.stream_id == RageState.stream_id,
        Blacklist.person_id == RageState.person_id,
        Blacklist.lifted_at.is_(None),
    )
    rage = (
        select(RageState.stream_id, RageState.pressure, RageState.silenced_until,
               Blacklist.stream_id.is_not(None))
        .outerjoin(Blacklist, listed)
        .where(RageState.person_id == person_id)
    )  # fmt: skip
    only_listed = select(Blacklist.stream_id).where(
        Blacklist.person_id == person_id, Blacklist.lifted_at.is_(None)
    )
    async with engine.connect() as conn:
        rows = [Standing(s, float(p), u, bool(b)) for s, p, u, b in await conn.execute(rage)]
        seen = {row.stream_id for row in rows}
        for (stream_id,) in await conn.execute(only_listed):
            if stream_id not in seen:
                rows.append(Standing(stream_id, 0.0, None, True))
    return rows


def persona_actions(engine: AsyncEngine, store: PersonaStore) -> dict[str, PersonAction]:
    """The person page's edits: forgive in one chat, drop a note, reset a favorability."""

    async def lift(person_id: int, fields: Mapping[str, str], now: datetime) -> bool:
        stream_id = read_db_id(fields.get("stream_id", ""))
        if stream_id is None:
            return False
        logger.info("console: person {} forgiven in chat {} by the owner", person_id, stream_id)
        return await store.lift(stream_id, person_id, now)

    async def drop_note(person_id: int, fields: Mapping[str, str], now: datetime) -> bool:
        note_id = read_db_id(fields.get("note_id", ""))
        self_id = fields.get("self_id", "")
        mine = {note.id for note in await store.notes(self_id, [person_id])}
        if note_id is None or note_id not in mine:
            return False
        logger.info("console: relation note {} dropped by the owner", note_id)
        return await store.drop_note(note_id)

    async def reset_favour(person_id: int, fields: Mapping[str, str], now: datetime) -> bool:
        self_id = fields.get("self_id", "")
        if self_id not in await favorability_of(engine, person_id):
            return False  # only an account that feels something about them
        logger.info("console: favorability of {} with {} reset by the owner", person_id, self_id)
        await store.set_favorability(self_id, person_id, 0.0, "", now)
        return True

    return {"lift": lift, "note_drop": drop_note, "favour_reset": reset_favour}
