"""What a group knows of itself: its name, its members' cards, roles and titles, and the
group a temporary private chat came through (replies there must name it).

The timeline writer calls this inside its transaction; only changes are written, and the
caches learn a value only once the transaction that wrote it has committed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.core.inbound import GroupNotice, InboundMessage, NoticeKind, StreamKey, StreamKind
from pallas.store.models import Identity, Member, Message, Stream, StreamAccount
from pallas.store.sql import BoundedCache, upsert

_NAME_CHARS = 128
_ROLE_CHARS = 16
_TITLE_CHARS = 64


@dataclass(frozen=True)
class StreamFacts:
    name: str
    via_group: str | None


@dataclass(frozen=True)
class MemberFacts:
    card: str
    role: str


class GroupDirectory:
    def __init__(self, cache_size: int = 50_000) -> None:
        self._streams: BoundedCache[int, StreamFacts] = BoundedCache(cache_size)
        self._members: BoundedCache[tuple[int, int], MemberFacts] = BoundedCache(cache_size)
        self._pending_streams: dict[int, StreamFacts] = {}
        self._pending_members: dict[tuple[int, int], MemberFacts] = {}

    async def record_messages(
        self,
        conn: AsyncConnection,
        messages: Iterable[tuple[InboundMessage, int, int]],
        now: datetime,
    ) -> None:
        """Learn from each (message, stream id, sender person id): names, cards, routes."""
        for msg, stream_id, person_id in messages:
            await self._learn_stream(conn, msg, stream_id)
            if msg.stream.kind is StreamKind.GROUP and not msg.is_poke:
                await self._learn_member(conn, msg, stream_id, person_id, now)

    async def apply_notice(
        self,
        conn: AsyncConnection,
        notice: GroupNotice,
        stream_id: int,
        person_id: int | None,
        now: datetime,
    ) -> None:
        """A notice that changes what the group knows (a card, a title, an admin, a name)."""
        if notice.kind is NoticeKind.GROUP_RENAMED and notice.value:
            await self._set_stream(conn, stream_id, name=notice.value[:_NAME_CHARS])
            return
        if person_id is None:
            return
        values = _member_change(notice)
        if values:
            await conn.execute(
                upsert(
                    conn,
                    Member.__table__,  # type: ignore[arg-type]
                    ["stream_id", "person_id"],
                    {"stream_id": stream_id, "person_id": person_id, "updated_at": now, **values},
                )
            )
            # The next message of this member compares against the store again.
            self._pending_members.pop((stream_id, person_id), None)
            self._members.discard((stream_id, person_id))

    def committed(self) -> None:
        """The transaction committed: what it wrote is now safe to cache."""
        self._streams.put_all(self._pending_streams)
        self._members.put_all(self._pending_members)
        self.rolled_back()

    def rolled_back(self) -> None:
        self._pending_streams = {}
        self._pending_members = {}

    async def _learn_stream(self, conn: AsyncConnection, msg: InboundMessage, sid: int) -> None:
        name = msg.stream_name[:_NAME_CHARS]
        if not name and msg.via_group is None:
            return
        known = self._pending_streams.get(sid) or self._streams.get(sid)
        if known is None:
            known = await _stream_facts(conn, sid)
        wanted = StreamFacts(name or known.name, msg.via_group or known.via_group)
        if wanted != known:
            await self._set_stream(conn, sid, name=wanted.name, via_group=wanted.via_group)
        self._pending_streams[sid] = wanted

    async def _set_stream(self, conn: AsyncConnection, sid: int, **values: Any) -> None:
        await conn.execute(update(Stream).where(Stream.id == sid).values(**values))
        self._pending_streams.pop(sid, None)
        self._streams.discard(sid)

    async def record_profile(
        self, conn: AsyncConnection, sid: int, pid: int, card: str, role: str, now: datetime
    ) -> None:
        """What the platform said of a member when asked."""
        await self._learn(conn, sid, pid, card, role, now)

    async def _learn_member(
        self, conn: AsyncConnection, msg: InboundMessage, sid: int, pid: int, now: datetime
    ) -> None:
        await self._learn(conn, sid, pid, msg.sender.card, msg.sender.role, now)

    async def _learn(
        self, conn: AsyncConnection, sid: int, pid: int, card: str, role: str, now: datetime
    ) -> None:
        key = (sid, pid)
        known = self._pending_members.get(key) or self._members.get(key)
        role = role[:_ROLE_CHARS]
        wanted = MemberFacts(card[:_NAME_CHARS], role or (known.role if known else ""))
        if wanted == known:
            return
        values: dict[str, Any] = {"stream_id": sid, "person_id": pid, "card": wanted.card}
        if role:
            values["role"] = role
        await conn.execute(
            upsert(
                conn,
                Member.__table__,  # type: ignore[arg-type]
                ["stream_id", "person_id"],
                {**values, "updated_at": now},
            )
        )
        self._pending_members[key] = wanted


def _member_change(notice: GroupNotice) -> dict[str, str]:
    match notice.kind:
        case NoticeKind.CARD_CHANGED:
            return {"card": notice.value[:_NAME_CHARS]}
        case NoticeKind.TITLE_CHANGED:
            return {"title": notice.value[:_TITLE_CHARS]}
        case NoticeKind.ADMIN_SET:
            return {"role": "admin"}
        case NoticeKind.ADMIN_UNSET:
            return {"role": "member"}
    return {}


async def _stream_facts(conn: AsyncConnection, sid: int) -> StreamFacts:
    row = (
        await conn.execute(select(Stream.name, Stream.via_group).where(Stream.id == sid))
    ).first()
    return StreamFacts(row.name, row.via_group) if row is not None else StreamFacts("", None)


async def temp_chat_group(engine: AsyncEngine, stream: StreamKey) -> str | None:
    """The group a private chat was opened through, when it is a temporary chat."""
    if stream.kind is not StreamKind.PRIVATE:
        return None
    query = select(Stream.via_group).where(
        Stream.platform == stream.platform,
        Stream.self_id == stream.self_id,
        Stream.kind == stream.kind.value,
        Stream.external_id == stream.external_id,
    )
    async with engine.connect() as conn:
        return (await conn.execute(query)).scalar_one_or_none()


async def known_in_stream(engine: AsyncEngine, stream_id: int, person_id: int) -> bool:
    """A member of this chat, or someone who has spoken in it."""
    member = select(Member.person_id).where(
        Member.stream_id == stream_id, Member.person_id == person_id
    )
    spoke = (
        select(Message.id)
        .where(Message.stream_id == stream_id, Message.sender_person_id == person_id)
        .limit(1)
    )
    async with engine.connect() as conn:
        if await conn.scalar(member) is not None:
            return True
        return await conn.scalar(spoke) is not None


async def group_admins(engine: AsyncEngine, stream_id: int, platform: str) -> list[str]:
    """The platform ids of the group's owner and admins, as the bot last saw their roles;
    never one of the bot's own accounts (an admin account of the bot is not an addressee)."""
    query = (
        select(Identity.user_id)
        .join(Member, Member.person_id == Identity.person_id)
        .where(Member.stream_id == stream_id, Member.role.in_(("owner", "admin")),
               Identity.platform == platform)
    )  # fmt: skip
    ours = select(StreamAccount.self_id).where(StreamAccount.stream_id == stream_id)
    own = select(Stream.self_id).where(Stream.id == stream_id)
    async with engine.connect() as conn:
        found = set((await conn.execute(query)).scalars())
        for accounts in (ours, own):
            found -= set((await conn.execute(accounts)).scalars())
    return sorted(found)
