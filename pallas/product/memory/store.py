"""The memory store: entries, their keyword index, the undo log, consent and cursors.

Every change to an entry writes a `memory_change` row in the same transaction (who, what it
was, what it became), so an owner can audit it and a correction can be undone. Forgetting
never deletes a row: the entry's status says it is no longer recalled. See docs/memory.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.core.facts import MemoryKind, NewMemory
from pallas.core.terms import index_terms, overlap
from pallas.product.memory.tables import (
    MemoryChange,
    MemoryConsent,
    MemoryCursor,
    MemoryEntry,
    MemoryTerm,
    MemoryVector,
)
from pallas.store.database import Database
from pallas.store.sql import insert_ignoring_conflicts, upsert

MAX_TEXT_CHARS = 300


class MemoryStatus(StrEnum):
    ACTIVE = "active"
    FORGOTTEN = "forgotten"  # someone asked; kept for the audit and for undo
    FADED = "faded"  # decayed or pushed out by a cap
    HEARD = "heard"  # a group entry one member said: waits for a second one, never recalled


@dataclass(frozen=True)
class MemoryLimits:
    facts_per_person: int = 100  # per person and chat
    group_facts: int = 300  # per chat
    episodes: int = 50  # per chat
    behaviors: int = 30  # per chat
    heard: int = 50  # group entries waiting for a second member, per chat and kind
    merge_overlap: float = 0.6  # term overlap at which a new entry is the same as an old one


@dataclass(frozen=True)
class MemoryRecord:
    id: int
    kind: MemoryKind
    stream_id: int
    person_id: int | None
    text: str
    source: str
    source_message_ids: tuple[int, ...]
    taught_by: int | None
    job_id: int | None
    confidence: float
    reinforced: int
    status: MemoryStatus
    created_at: datetime
    updated_at: datetime
    last_seen_at: datetime
    embedding_model: str
    embedding_dim: int


@dataclass(frozen=True)
class Remembered:
    entry_id: int
    merged: bool  # the same thing was known already: reinforced, not added
    faded: tuple[int, ...] = ()  # entries a cap pushed out to make room
    heard: bool = False  # kept aside until a second member says it


@dataclass(frozen=True)
class ChangeRecord:
    id: int
    entry_id: int
    action: str
    actor: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    turn_id: int | None
    at: datetime


_KEEP = object()
_RECORD_COLUMNS = list(MemoryEntry.__table__.c)


def owner_key(stream_id: int, person_id: int | None) -> str:
    """Index rows are filed by whom they are about, so recall reads only who is present."""
    return f"p{person_id}" if person_id is not None else f"s{stream_id}"


def to_record(row: Any) -> MemoryRecord:
    values = row._mapping
    return MemoryRecord(
        **{
            **{c.name: values[c.name] for c in _RECORD_COLUMNS},
            "kind": MemoryKind(values["kind"]),
            "status": MemoryStatus(values["status"]),
            "source_message_ids": tuple(values["source_message_ids"] or ()),
        }
    )


def _snapshot(record: MemoryRecord) -> dict[str, Any]:
    return {"text": record.text, "person_id": record.person_id, "status": record.status.value}


class MemoryStore:
    def __init__(
        self,
        engine: AsyncEngine,
        *,
        limits: MemoryLimits | None = None,
    ) -> None:
        self._engine = engine
        self.limits = limits or MemoryLimits()
        self._writes = Database.of(engine).writes()

    # -- writing ------------------------------------------------------------------------

    async def remember(
        self,
        items: Sequence[NewMemory],
        now: datetime,
        *,
        actor: str,
        turn_id: int | None = None,
        cursor: tuple[int, int] | None = None,
    ) -> list[Remembered]:
        """Store (or merge) every item, and move a chat's extraction cursor, in one
        transaction: a job that dies half-way left nothing behind and runs again."""
        async with self._writes.begin() as conn:
            done = [await self._remember_one(conn, item, now, actor, turn_id) for item in items]
            if cursor is not None:
                await _move_cursor(conn, cursor[0], cursor[1], now)
        return done

    async def _remember_one(
        self,
        conn: AsyncConnection,
        item: NewMemory,
        now: datetime,
        actor: str,
        turn_id: int | None,
    ) -> Remembered:
        text = " ".join(item.text.split())[:MAX_TEXT_CHARS]
        terms = index_terms(text)
        # One read of its place serves both the duplicate check and the cap.
        active = await _entries_at(conn, item.stream_id, item.person_id, item.kind, _ACTIVE)
        same = self._duplicate_of(active, item, terms)
        if same is not None:
            await self._reinforce(conn, same, item, text, now, actor, turn_id)
            return Remembered(same.id, merged=True)
        waiting = await _entries_at(conn, item.stream_id, item.person_id, item.kind, _HEARD)
        least = self.limits.merge_overlap
        same = next((w for w in waiting if _same_claim(w.text, text, terms, least)), None)
        if same is not None:
            return await self._heard_again(conn, same, item, text, active, now, actor, turn_id)
        place = waiting if item.heard else active
        faded = await self._make_room(conn, item, place, now)
        entry_id = await self._insert(conn, item, text, now)
        if not item.heard:  # a heard entry is found by nothing until it is confirmed
            await _index(conn, entry_id, owner_key(item.stream_id, item.person_id), terms)
        action = "heard" if item.heard else "created"
        await _log(conn, entry_id, action, actor, None, {"text": text}, turn_id, now)
        return Remembered(entry_id, merged=False, faded=faded, heard=item.heard)

    async def _heard_again(
        self,
        conn: AsyncConnection,
        same: MemoryRecord,
        item: NewMemory,
        text: str,
        active: Sequence[MemoryRecord],
        now: datetime,
        actor: str,
        turn_id: int | None,
    ) -> Remembered:
        """The same claim as a heard entry: from its teacher again it still waits; from a
        second member, or taught by an admin, it is the group's now (its wording kept)."""
        kept = await self._reinforce(conn, same, item, text, now, actor, turn_id)
        if item.heard and same.taught_by in (None, item.taught_by):
            return Remembered(same.id, merged=True, heard=True)
        faded = await self._make_room(conn, replace(item, heard=False), active, now)
        await _set_status(conn, (same.id,), MemoryStatus.ACTIVE, now)
        await _reindex(conn, same.id, owner_key(same.stream_id, same.person_id), kept)
        await _log(conn, same.id, "confirmed", actor, {"status": "heard"}, {"text": kept},
                   turn_id, now)  # fmt: skip
        return Remembered(same.id, merged=True, faded=faded)

    def _duplicate_of(
        self, active: Sequence[MemoryRecord], item: NewMemory, terms: frozenset[str]
    ) -> MemoryRecord | None:
        for record in active:
            if record.text == item.text or overlap(terms, index_terms(record.text)) >= (
                self.limits.merge_overlap
            ):
                return record
        return None

    async def _reinforce(
        self,
        conn: AsyncConnection,
        old: MemoryRecord,
        item: NewMemory,
        text: str,
        now: datetime,
        actor: str,
        turn_id: int | None,
    ) -> str:
        """Merge `item` into `old`; the wording it keeps."""
        # The newer wording wins when it says more, and only from whoever taught the entry:
        # nobody rewords someone else's teaching by saying something like it.
        own = old.taught_by in (None, item.taught_by)
        new_text = text if own and len(text) > len(old.text) else old.text
        sources = tuple(dict.fromkeys((*old.source_message_ids, *item.source_message_ids)))[-20:]
        await conn.execute(
            update(MemoryEntry)
            .where(MemoryEntry.id == old.id)
            .values(
                text=new_text,
                confidence=min(1.0, max(old.confidence, item.confidence) + 0.1),
                reinforced=MemoryEntry.reinforced + 1,
                source_message_ids=list(sources),
                last_seen_at=now,
                updated_at=now,
            )
        )
        if new_text != old.text and old.status is MemoryStatus.ACTIVE:
            await _reindex(conn, old.id, owner_key(old.stream_id, old.person_id), new_text)
            await _drop_vectors(conn, (old.id,))
        await _log(
            conn, old.id, "merged", actor, {"text": old.text}, {"text": new_text}, turn_id, now
        )
        return new_text

    async def _make_room(
        self,
        conn: AsyncConnection,
        item: NewMemory,
        active: Sequence[MemoryRecord],
        now: datetime,
    ) -> tuple[int, ...]:
        """Past the cap for its place, the weakest entries there fade (lowest confidence,
        then the longest unseen)."""
        cap = self._cap(item)
        excess = len(active) - cap + 1
        if excess <= 0:
            return ()
        weakest = sorted(active, key=lambda r: (r.confidence, r.last_seen_at))[:excess]
        ids = tuple(r.id for r in weakest)
        await _set_status(conn, ids, MemoryStatus.FADED, now)
        for record in weakest:
            await _log(conn, record.id, "faded", "cap", _snapshot(record), None, None, now)
        return ids

    def _cap(self, item: NewMemory) -> int:
        if item.heard:
            return self.limits.heard
        if item.kind is MemoryKind.BEHAVIOR:
            return self.limits.behaviors
        if item.kind is MemoryKind.EPISODE:
            return self.limits.episodes
        return (
            self.limits.facts_per_person if item.person_id is not None else self.limits.group_facts
        )

    async def _insert(
        self, conn: AsyncConnection, item: NewMemory, text: str, now: datetime
    ) -> int:
        result = await conn.execute(
            insert(MemoryEntry)
            .values(
                kind=item.kind.value,
                stream_id=item.stream_id,
                person_id=item.person_id,
                text=text,
                source=item.source,
                source_message_ids=list(item.source_message_ids),
                taught_by=item.taught_by,
                job_id=item.job_id,
                confidence=max(0.0, min(1.0, item.confidence)),
                reinforced=0,
                status=(MemoryStatus.HEARD if item.heard else MemoryStatus.ACTIVE).value,
                created_at=now,
                updated_at=now,
                last_seen_at=now,
                embedding_model="",
                embedding_dim=0,
            )
            .returning(MemoryEntry.id)
        )
        return int(result.scalar_one())

    # -- correcting and forgetting --------------------------------------------------------

    async def correct(
        self,
        entry_id: int,
        now: datetime,
        *,
        actor: str,
        text: str | None = None,
        person_id: Any = _KEEP,
        turn_id: int | None = None,
    ) -> MemoryRecord | None:
        """Change what an active entry says, or whom it is about; None if there is none."""
        async with self._writes.begin() as conn:
            old = await _get(conn, entry_id)
            if old is None or old.status is not MemoryStatus.ACTIVE:
                return None
            values: dict[str, Any] = {"updated_at": now, "last_seen_at": now}
            if text is not None:
                values["text"] = " ".join(text.split())[:MAX_TEXT_CHARS]
            if person_id is not _KEEP:
                values["person_id"] = person_id
            await conn.execute(update(MemoryEntry).where(MemoryEntry.id == entry_id).values(values))
            await _drop_vectors(conn, (entry_id,))  # reworded or moved: embedded again later
            new = await _get(conn, entry_id)
            assert new is not None
            await _reindex(conn, entry_id, owner_key(new.stream_id, new.person_id), new.text)
            await _log(
                conn, entry_id, "corrected", actor, _snapshot(old), _snapshot(new), turn_id, now
            )
            return new

    async def forget(
        self, entry_id: int, now: datetime, *, actor: str, turn_id: int | None = None
    ) -> MemoryRecord | None:
        async with self._writes.begin() as conn:
            old = await _get(conn, entry_id)
            if old is None or old.status is not MemoryStatus.ACTIVE:
                return None
            await _set_status(conn, (entry_id,), MemoryStatus.FORGOTTEN, now)
            await _log(conn, entry_id, "forgotten", actor, _snapshot(old), None, turn_id, now)
            return await _get(conn, entry_id)

    async def undo(self, change_id: int, now: datetime, *, actor: str) -> MemoryRecord | None:
        """Put an entry back as it was before one change (a correction, a forgetting, a fade)."""
        async with self._writes.begin() as conn:
            change = (
                await conn.execute(select(MemoryChange).where(MemoryChange.id == change_id))
            ).first()
            if change is None or change.before is None:
                return None
            before = dict(change.before)
            await conn.execute(
                update(MemoryEntry)
                .where(MemoryEntry.id == change.entry_id)
                .values(
                    text=before["text"],
                    person_id=before["person_id"],
                    status=before["status"],
                    updated_at=now,
                )
            )
            record = await _get(conn, change.entry_id)
            assert record is not None
            if record.status is MemoryStatus.ACTIVE:
                await _reindex(
                    conn, record.id, owner_key(record.stream_id, record.person_id), record.text
                )
            await _log(conn, record.id, "undone", actor, change.after, before, None, now)
            return record

    async def fade(self, entry_ids: Iterable[int], now: datetime, *, actor: str = "decay") -> int:
        ids = tuple(entry_ids)
        if not ids:
            return 0
        async with self._writes.begin() as conn:
            await _set_status(conn, ids, MemoryStatus.FADED, now)
            for entry_id in ids:
                await _log(conn, entry_id, "faded", actor, None, None, None, now)
        return len(ids)

    async def set_embedding(self, entry_id: int, model: str, vector: bytes, dim: int) -> bool:
        """File an active entry's vector (replacing any it had); False if it is not active."""
        async with self._writes.begin() as conn:
            entry = await _get(conn, entry_id)
            if entry is None or entry.status is not MemoryStatus.ACTIVE:
                return False
            await _drop_vectors(conn, (entry_id,))
            await conn.execute(
                insert(MemoryVector).values(
                    owner=owner_key(entry.stream_id, entry.person_id),
                    model=model,
                    entry_id=entry_id,
                    dim=dim,
                    stream_id=entry.stream_id,
                    kind=entry.kind.value,
                    vector=vector,
                )
            )
            await conn.execute(
                update(MemoryEntry)
                .where(MemoryEntry.id == entry_id)
                .values(embedding_model=model, embedding_dim=dim)
            )
            return True

    # -- consent and cursors ---------------------------------------------------------------

    async def grant_consent(
        self, person_id: int, now: datetime, message_id: int | None = None
    ) -> None:
        async with self._writes.begin() as conn:
            await conn.execute(
                upsert(
                    conn,
                    MemoryConsent.__table__,
                    ["person_id"],
                    {"person_id": person_id, "granted_at": now, "message_id": message_id},
                )
            )

    async def revoke_consent(self, person_id: int) -> None:
        async with self._writes.begin() as conn:
            await conn.execute(delete(MemoryConsent).where(MemoryConsent.person_id == person_id))

    async def consenting(self, person_ids: Iterable[int]) -> frozenset[int]:
        ids = list(set(person_ids))
        if not ids:
            return frozenset()
        async with self._engine.connect() as conn:
            rows = await conn.execute(
                select(MemoryConsent.person_id).where(MemoryConsent.person_id.in_(ids))
            )
            return frozenset(int(r[0]) for r in rows)

    async def taught_since(self, person_id: int, since: datetime) -> list[datetime]:
        """When this person's teachings that were kept were written (for the cooldown)."""
        query = select(MemoryEntry.created_at).where(
            MemoryEntry.taught_by == person_id, MemoryEntry.created_at >= since
        )
        async with self._engine.connect() as conn:
            return list((await conn.execute(query)).scalars())

    async def cursor(self, stream_id: int) -> int:
        async with self._engine.connect() as conn:
            value = await conn.scalar(
                select(MemoryCursor.last_message_id).where(MemoryCursor.stream_id == stream_id)
            )
            return int(value or 0)

    # -- reading ----------------------------------------------------------------------------

    async def get(self, entry_id: int) -> MemoryRecord | None:
        async with self._engine.connect() as conn:
            return await _get(conn, entry_id)

    async def entries(
        self,
        *,
        stream_id: int | None = None,
        person_id: int | None = None,
        kind: MemoryKind | None = None,
        status: MemoryStatus | None = MemoryStatus.ACTIVE,
        limit: int = 200,
        below_id: int | None = None,
    ) -> list[MemoryRecord]:
        """Newest first; `below_id` pages on from the last id of the previous page."""
        query = select(*_RECORD_COLUMNS).order_by(MemoryEntry.id.desc()).limit(limit)
        if below_id is not None:
            query = query.where(MemoryEntry.id < below_id)
        if stream_id is not None:
            query = query.where(MemoryEntry.stream_id == stream_id)
        if person_id is not None:
            query = query.where(MemoryEntry.person_id == person_id)
        if kind is not None:
            query = query.where(MemoryEntry.kind == kind.value)
        if status is not None:
            query = query.where(MemoryEntry.status == status.value)
        async with self._engine.connect() as conn:
            return [to_record(row) for row in await conn.execute(query)]

    async def changes(self, entry_id: int) -> list[ChangeRecord]:
        query = (
            select(MemoryChange).where(MemoryChange.entry_id == entry_id).order_by(MemoryChange.id)
        )
        async with self._engine.connect() as conn:
            return [
                ChangeRecord(**{k: row._mapping[k] for k in ChangeRecord.__dataclass_fields__})
                for row in await conn.execute(query)
            ]

    async def person_changes(self, person_id: int, limit: int) -> list[ChangeRecord]:
        """The newest changes to a person's entries, newest first (the console's undo list)."""
        query = (
            select(MemoryChange)
            .join(MemoryEntry, MemoryEntry.id == MemoryChange.entry_id)
            .where(MemoryEntry.person_id == person_id)
            .order_by(MemoryChange.id.desc())
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            return [
                ChangeRecord(**{k: row._mapping[k] for k in ChangeRecord.__dataclass_fields__})
                for row in await conn.execute(query)
            ]

    async def count(self, status: MemoryStatus = MemoryStatus.ACTIVE) -> int:
        async with self._engine.connect() as conn:
            value = await conn.scalar(
                select(func.count())
                .select_from(MemoryEntry)
                .where(MemoryEntry.status == status.value)
            )
            return int(value or 0)


async def _get(conn: AsyncConnection, entry_id: int) -> MemoryRecord | None:
    row = (await conn.execute(select(*_RECORD_COLUMNS).where(MemoryEntry.id == entry_id))).first()
    return to_record(row) if row is not None else None


_ACTIVE, _HEARD = MemoryStatus.ACTIVE, MemoryStatus.HEARD
# A claim and its negation share most words ("周五开黑" / "周五不开黑"): only the same claim
# confirms a heard entry.
_NEGATION = re.compile(r"不|没|别|非|无|未|禁止")


def _same_claim(heard: str, text: str, terms: frozenset[str], least: float) -> bool:
    if len(_NEGATION.findall(heard)) != len(_NEGATION.findall(text)):
        return False
    return heard == text or overlap(terms, index_terms(heard)) >= least


async def _entries_at(
    conn: AsyncConnection,
    stream_id: int,
    person_id: int | None,
    kind: MemoryKind,
    status: MemoryStatus,
) -> list[MemoryRecord]:
    query = select(*_RECORD_COLUMNS).where(
        MemoryEntry.stream_id == stream_id,
        MemoryEntry.kind == kind.value,
        MemoryEntry.status == status.value,
    )
    if person_id is None:
        query = query.where(MemoryEntry.person_id.is_(None))
    else:
        query = query.where(MemoryEntry.person_id == person_id)
    return [to_record(row) for row in await conn.execute(query)]


async def _set_status(
    conn: AsyncConnection, ids: Sequence[int], status: MemoryStatus, now: datetime
) -> None:
    await conn.execute(
        update(MemoryEntry)
        .where(MemoryEntry.id.in_(ids))
        .values(status=status.value, updated_at=now)
    )
    if status is not MemoryStatus.ACTIVE:
        await conn.execute(delete(MemoryTerm).where(MemoryTerm.entry_id.in_(ids)))
        await _drop_vectors(conn, ids)


async def _drop_vectors(conn: AsyncConnection, ids: Sequence[int]) -> None:
    await conn.execute(delete(MemoryVector).where(MemoryVector.entry_id.in_(ids)))
    await conn.execute(
        update(MemoryEntry)
        .where(MemoryEntry.id.in_(ids))
        .values(embedding_model="", embedding_dim=0)
    )


async def _index(conn: AsyncConnection, entry_id: int, owner: str, terms: frozenset[str]) -> None:
    if terms:
        await conn.execute(
            insert_ignoring_conflicts(conn, MemoryTerm.__table__),
            [{"owner": owner, "term": term, "entry_id": entry_id} for term in sorted(terms)],
        )


async def _reindex(conn: AsyncConnection, entry_id: int, owner: str, text: str) -> None:
    await conn.execute(delete(MemoryTerm).where(MemoryTerm.entry_id == entry_id))
    await _index(conn, entry_id, owner, index_terms(text))


async def _log(
    conn: AsyncConnection,
    entry_id: int,
    action: str,
    actor: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    turn_id: int | None,
    now: datetime,
) -> None:
    await conn.execute(
        insert(MemoryChange).values(
            entry_id=entry_id,
            action=action,
            actor=actor[:64],
            before=before,
            after=after,
            turn_id=turn_id,
            at=now,
        )
    )


async def _move_cursor(
    conn: AsyncConnection, stream_id: int, message_id: int, now: datetime
) -> None:
    await conn.execute(
        upsert(
            conn,
            MemoryCursor.__table__,
            ["stream_id"],
            {"stream_id": stream_id, "last_message_id": message_id, "updated_at": now},
        )
    )


__all__ = [
    "ChangeRecord",
    "MemoryKind",
    "MemoryLimits",
    "MemoryRecord",
    "MemoryStatus",
    "MemoryStore",
    "NewMemory",
    "Remembered",
    "owner_key",
    "to_record",
]
