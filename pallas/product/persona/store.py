"""The bot's feelings about people, as stored state: rage and its silences, the blacklist,
favorability, relation notes (docs/persona.md). Three states kept apart: an attack moves rage
and favorability each by its own rule; nothing here changes the bot's style.

Who is ignored right now (an active silence or the blacklist) is read on every message, so it
is kept in memory too: loaded from the store on first use, updated by every write here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.product.persona.tables import (
    Blacklist,
    Favorability,
    RageSilence,
    RageState,
    RelationNote,
)
from pallas.store.audit import EventKind
from pallas.store.database import Database
from pallas.store.models import Event, Identity, Message
from pallas.store.sql import upsert

Who = tuple[int, int]  # (stream_id, person_id)
BLACKLISTED = "blacklisted"
SILENCED = "rage"
MAX_NOTES = 8  # active notes per person: the oldest observed or extracted ones make room
OWNER = "owner"  # a note's source: an owner taught it (never displaced)


@dataclass(frozen=True)
class RageRow:
    pressure: float
    updated_at: datetime
    silenced_until: datetime | None


@dataclass(frozen=True)
class RageWrite:
    """What one attack did (from the pure rule), written in one transaction."""

    stream_id: int
    person_id: int
    pressure: float
    silenced_until: datetime | None
    blacklist_reason: str = ""  # non-empty: put on the blacklist


@dataclass(frozen=True)
class Note:
    id: int
    person_id: int
    text: str
    source: str


class PersonaStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()
        self._ignored: dict[Who, datetime | None] | None = None  # None value: until lifted

    # -- who is ignored ------------------------------------------------------------------

    async def ignored_because(self, stream_id: int, person_id: int, now: datetime) -> str | None:
        ignored = await self._ignored_map()
        if (stream_id, person_id) not in ignored:
            return None
        until = ignored[(stream_id, person_id)]
        if until is None:
            return BLACKLISTED
        return SILENCED if until > now else None

    async def _ignored_map(self) -> dict[Who, datetime | None]:
        if self._ignored is None:
            async with self._engine.connect() as conn:
                silenced = await conn.execute(
                    select(
                        RageState.stream_id, RageState.person_id, RageState.silenced_until
                    ).where(RageState.silenced_until.is_not(None))
                )
                listed = await conn.execute(
                    select(Blacklist.stream_id, Blacklist.person_id).where(
                        Blacklist.lifted_at.is_(None)
                    )
                )
                ignored: dict[Who, datetime | None] = {(s, p): u for s, p, u in silenced}
                ignored.update({(s, p): None for s, p in listed})
            self._ignored = ignored
        return self._ignored

    # -- rage ----------------------------------------------------------------------------

    async def rage(self, stream_id: int, person_id: int) -> RageRow | None:
        query = select(RageState.pressure, RageState.updated_at, RageState.silenced_until).where(
            RageState.stream_id == stream_id, RageState.person_id == person_id
        )
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return RageRow(*row) if row else None

    async def silences_since(
        self, stream_id: int, person_id: int, since: datetime
    ) -> list[datetime]:
        """Silences since `since`, counting only those after an owner's last forgiveness."""
        forgiven = (
            select(RageState.forgiven_at)
            .where(RageState.stream_id == stream_id, RageState.person_id == person_id)
            .scalar_subquery()
        )
        query = select(RageSilence.started_at).where(
            RageSilence.stream_id == stream_id,
            RageSilence.person_id == person_id,
            RageSilence.started_at >= since,
            or_(forgiven.is_(None), RageSilence.started_at > forgiven),
        )
        async with self._engine.connect() as conn:
            return list(await conn.scalars(query))

    async def write_rage(self, write: RageWrite, now: datetime) -> None:
        who = (write.stream_id, write.person_id)
        values = {
            "stream_id": write.stream_id,
            "person_id": write.person_id,
            "pressure": write.pressure,
            "updated_at": now,
            "silenced_until": write.silenced_until,
        }
        ignored = await self._ignored_map()
        async with self._writes.begin() as conn:
            await conn.execute(
                upsert(conn, RageState.__table__, ["stream_id", "person_id"], values)
            )
            if write.silenced_until is not None:
                await conn.execute(
                    RageSilence.__table__.insert().values(
                        stream_id=write.stream_id,
                        person_id=write.person_id,
                        started_at=now,
                        until=write.silenced_until,
                        pressure=write.pressure,
                    )
                )
            if write.blacklist_reason:
                await _blacklist(conn, who, "auto", write.blacklist_reason, now)
        if write.blacklist_reason:
            ignored[who] = None
        elif write.silenced_until is not None:
            ignored[who] = write.silenced_until

    async def blacklist(self, stream_id: int, person_id: int, reason: str, now: datetime) -> None:
        """An owner's blacklisting."""
        ignored = await self._ignored_map()
        async with self._writes.begin() as conn:
            await _blacklist(conn, (stream_id, person_id), "owner", reason, now)
        ignored[(stream_id, person_id)] = None

    async def lift(self, stream_id: int, person_id: int, now: datetime) -> bool:
        """An owner forgives: off the blacklist, silence ended, pressure gone."""
        ignored = await self._ignored_map()
        async with self._writes.begin() as conn:
            lifted = await conn.execute(
                update(Blacklist)
                .where(
                    Blacklist.stream_id == stream_id,
                    Blacklist.person_id == person_id,
                    Blacklist.lifted_at.is_(None),
                )
                .values(lifted_at=now)
            )
            calmed = await conn.execute(
                update(RageState)
                .where(RageState.stream_id == stream_id, RageState.person_id == person_id)
                .where(or_(RageState.pressure > 0, RageState.silenced_until.is_not(None)))
                .values(pressure=0.0, silenced_until=None, updated_at=now)
            )
            await conn.execute(  # the silences before this no longer count towards a blacklist
                update(RageState)
                .where(RageState.stream_id == stream_id, RageState.person_id == person_id)
                .values(forgiven_at=now)
            )
        ignored.pop((stream_id, person_id), None)
        return bool(lifted.rowcount or calmed.rowcount)

    async def blacklisted(self, stream_id: int) -> list[int]:
        query = select(Blacklist.person_id).where(
            Blacklist.stream_id == stream_id, Blacklist.lifted_at.is_(None)
        )
        async with self._engine.connect() as conn:
            return list(await conn.scalars(query))

    # -- favorability --------------------------------------------------------------------

    async def favorability(self, self_id: str, person_id: int) -> tuple[float, str]:
        query = select(Favorability.score, Favorability.warmed_on).where(
            Favorability.self_id == self_id, Favorability.person_id == person_id
        )
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return (float(row.score), str(row.warmed_on)) if row else (0.0, "")

    async def scores(self, self_id: str, person_ids: Iterable[int]) -> dict[int, float]:
        query = select(Favorability.person_id, Favorability.score).where(
            Favorability.self_id == self_id, Favorability.person_id.in_(list(person_ids))
        )
        async with self._engine.connect() as conn:
            return {int(p): float(s) for p, s in await conn.execute(query)}

    async def set_favorability(
        self, self_id: str, person_id: int, score: float, warmed_on: str, now: datetime
    ) -> None:
        values = {
            "self_id": self_id,
            "person_id": person_id,
            "score": score,
            "warmed_on": warmed_on,
            "updated_at": now,
        }
        async with self._writes.begin() as conn:
            await conn.execute(
                upsert(conn, Favorability.__table__, ["self_id", "person_id"], values)
            )

    # -- relation notes ------------------------------------------------------------------

    async def notes(self, self_id: str, person_ids: Iterable[int]) -> list[Note]:
        query = (
            select(RelationNote.id, RelationNote.person_id, RelationNote.text, RelationNote.source)
            .where(
                RelationNote.self_id == self_id,
                RelationNote.person_id.in_(list(person_ids)),
                RelationNote.active.is_(True),
            )
            .order_by(RelationNote.id)
        )
        async with self._engine.connect() as conn:
            return [Note(*row) for row in await conn.execute(query)]

    async def add_note(
        self, self_id: str, person_id: int, text: str, source: str, now: datetime
    ) -> bool:
        """Keep a note (False: the same text is already there); the oldest observed note
        makes room past MAX_NOTES, an owner's never."""
        async with self._writes.begin() as conn:
            same = await conn.scalar(
                select(func.count()).where(
                    RelationNote.self_id == self_id,
                    RelationNote.person_id == person_id,
                    RelationNote.text == text,
                    RelationNote.active.is_(True),
                )
            )
            if same:
                return False
            if source != OWNER and await _owner_notes(conn, self_id, person_id) >= MAX_NOTES:
                return False  # the owner's notes fill every place: an observation waits
            await conn.execute(
                RelationNote.__table__.insert().values(
                    self_id=self_id,
                    person_id=person_id,
                    text=text[:200],
                    source=source,
                    created_at=now,
                    active=True,
                )
            )
            await _make_room(conn, self_id, person_id)
        return True

    async def drop_note(self, note_id: int) -> bool:
        async with self._writes.begin() as conn:
            result = await conn.execute(
                update(RelationNote).where(RelationNote.id == note_id).values(active=False)
            )
        return bool(result.rowcount)


async def _blacklist(
    conn: AsyncConnection, who: Who, source: str, reason: str, now: datetime
) -> None:
    values = {
        "stream_id": who[0],
        "person_id": who[1],
        "added_at": now,
        "source": source,
        "reason": reason[:200],
        "lifted_at": None,
    }
    await conn.execute(upsert(conn, Blacklist.__table__, ["stream_id", "person_id"], values))


async def _owner_notes(conn: AsyncConnection, self_id: str, person_id: int) -> int:
    count = await conn.scalar(
        select(func.count()).where(
            RelationNote.self_id == self_id,
            RelationNote.person_id == person_id,
            RelationNote.active.is_(True),
            RelationNote.source == OWNER,
        )
    )
    return int(count or 0)


async def _make_room(conn: AsyncConnection, self_id: str, person_id: int) -> None:
    observed = list(
        await conn.scalars(
            select(RelationNote.id)
            .where(
                RelationNote.self_id == self_id,
                RelationNote.person_id == person_id,
                RelationNote.active.is_(True),
                RelationNote.source != OWNER,  # observed or extracted: theirs make room
            )
            .order_by(RelationNote.id.desc())
        )
    )
    total = await conn.scalar(
        select(func.count()).where(
            RelationNote.self_id == self_id,
            RelationNote.person_id == person_id,
            RelationNote.active.is_(True),
        )
    )
    extra = int(total or 0) - MAX_NOTES
    if extra > 0 and observed:
        await conn.execute(
            update(RelationNote).where(RelationNote.id.in_(observed[-extra:])).values(active=False)
        )


async def person_of(engine: AsyncEngine, platform: str, user_id: str) -> int | None:
    query = select(Identity.person_id).where(
        Identity.platform == platform, Identity.user_id == user_id
    )
    async with engine.connect() as conn:
        return await conn.scalar(query)


async def attacks_noted(engine: AsyncEngine, message_ids: Iterable[int]) -> bool:
    """Whether an attack was already counted on any of these messages."""
    query = select(func.count()).where(
        Event.kind == EventKind.ATTACK_NOTED.value, Event.message_id.in_(list(message_ids))
    )
    async with engine.connect() as conn:
        return bool(await conn.scalar(query))


async def senders_of(engine: AsyncEngine, message_ids: Iterable[int]) -> list[int]:
    """The people (not the bot) who wrote these messages."""
    query = select(Message.sender_person_id).where(
        Message.id.in_(list(message_ids)), Message.from_bot.is_(False)
    )
    async with engine.connect() as conn:
        return list(dict.fromkeys(await conn.scalars(query)))
