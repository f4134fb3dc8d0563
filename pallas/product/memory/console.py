"""What memory adds to the console: a person's facts on their page with the owner's edits
(correct one, forget one, put one back from the change log), forgetting through the API, and
a page of what each group taught about manners, reworded or dropped there (docs/console.md).
Plugged through the seam, so with memory off the page shows none.

Every edit is a change in the memory's own log (`memory_change`, actor `console`), the same
log a chat correction writes, and it shows in the next turn's recall.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException
from loguru import logger
from pydantic import BaseModel, Field

from pallas.core.numbers import read_db_id
from pallas.platform.http_params import RowId
from pallas.product.memory.store import ChangeRecord, MemoryKind, MemoryStore
from pallas.product.ports import OwnerPage, PersonAction, PersonFacet

PAGE_FACTS = 100
PAGE_CHANGES = 20
ACTOR = "console"
# The change log's actions in the owner's words; only these can be put back.
UNDOABLE = {"corrected": "改过", "forgotten": "忘掉了"}
MAX_WORDS = 300  # what an entry holds (store.MAX_TEXT_CHARS): longer is refused, not cut


BEHAVIOR_PAGE = OwnerPage(
    key="behaviors",
    title="教过的规矩",
    intro="各个群教给机器人的规矩（比如“在这个群别发表情包”）：可以改写，也可以删掉。",
    script=Path(__file__).parent / "static" / "behaviors.js",
)


class Rewording(BaseModel):
    text: str = Field(min_length=1, max_length=MAX_WORDS)


def memory_routes(store: MemoryStore, clock: Callable[[], datetime]) -> APIRouter:
    router = APIRouter()

    @router.post("/memory/{entry_id}/forget", tags=["persons"])
    async def forget(entry_id: RowId) -> dict[str, bool]:
        record = await store.forget(entry_id, clock(), actor=ACTOR)
        if record is not None:
            logger.info("console: memory entry {} forgotten by the owner", entry_id)
        return {"forgotten": record is not None}

    @router.get("/behaviors", tags=["memory"])
    async def behaviors() -> list[dict[str, Any]]:
        """What each group taught about manners, newest first."""
        taught = await store.entries(kind=MemoryKind.BEHAVIOR, limit=PAGE_FACTS)
        return [{"id": b.id, "text": b.text, "stream_id": b.stream_id} for b in taught]

    @router.put("/behaviors/{entry_id}", tags=["memory"])
    async def reword(entry_id: RowId, body: Rewording) -> dict[str, bool]:
        record = await store.get(entry_id)
        words = " ".join(body.text.split())
        if record is None or record.kind is not MemoryKind.BEHAVIOR:
            raise HTTPException(404, "没有这条规矩")
        if not words:
            raise HTTPException(422, "规矩不能是空的")
        if await store.correct(entry_id, clock(), actor=ACTOR, text=words) is None:
            raise HTTPException(404, "这条规矩已经不在了")
        logger.info("console: behavior {} reworded by the owner", entry_id)
        return {"reworded": True}

    return router


def memory_facet(store: MemoryStore) -> PersonFacet:
    async def facts(person_id: int, bots: Sequence[str]) -> Mapping[str, Any]:
        kept = await store.entries(person_id=person_id, limit=PAGE_FACTS)
        return {
            "facts": [{"id": f.id, "text": f.text, "kind": f.kind.value} for f in kept],
            "memory_changes": [_change(c) for c in await _undoable(store, person_id)],
        }

    return facts


async def _undoable(store: MemoryStore, person_id: int) -> list[ChangeRecord]:
    """Each entry's newest change, when it is one the owner may take back: a change already
    undone, or one a later change built on, is not offered (undoing it would lose that)."""
    newest: dict[int, ChangeRecord] = {}
    for change in await store.person_changes(person_id, PAGE_CHANGES):
        newest.setdefault(change.entry_id, change)
    return [c for c in newest.values() if c.action in UNDOABLE and c.before]


def _change(change: ChangeRecord) -> dict[str, Any]:
    before = (change.before or {}).get("text", "")
    after = (change.after or {}).get("text", "")
    return {"id": change.id, "what": UNDOABLE[change.action], "before": before,
            "after": after if change.action == "corrected" else "", "at": change.at}  # fmt: skip


def memory_actions(store: MemoryStore) -> dict[str, PersonAction]:
    """The person page's edits: by the entry's (or the change's) id, for this person only."""

    async def edit(person_id: int, fields: Mapping[str, str], now: datetime) -> bool:
        entry = await _own_entry(store, person_id, fields)
        text = " ".join(fields.get("text", "").split())
        if entry is None or not text or len(text) > MAX_WORDS:
            return False
        done = await store.correct(entry, now, actor=ACTOR, text=text)
        logger.info("console: memory entry {} corrected by the owner", entry)
        return done is not None

    async def forget(person_id: int, fields: Mapping[str, str], now: datetime) -> bool:
        entry = await _own_entry(store, person_id, fields)
        if entry is None:
            return False
        logger.info("console: memory entry {} forgotten by the owner", entry)
        return await store.forget(entry, now, actor=ACTOR) is not None

    async def restore(person_id: int, fields: Mapping[str, str], now: datetime) -> bool:
        change = read_db_id(fields.get("change_id", ""))
        offered = {c.id for c in await _undoable(store, person_id)}  # what the page lists
        if change is None or change not in offered:
            return False
        logger.info("console: memory change {} undone by the owner", change)
        return await store.undo(change, now, actor=ACTOR) is not None

    return {"memory_edit": edit, "memory_forget": forget, "memory_restore": restore}


async def _own_entry(store: MemoryStore, person_id: int, fields: Mapping[str, str]) -> int | None:
    """The form's entry id, when it names one of this person's entries."""
    entry_id = read_db_id(fields.get("entry_id", ""))
    record = await store.get(entry_id) if entry_id is not None else None
    return entry_id if record is not None and record.person_id == person_id else None
