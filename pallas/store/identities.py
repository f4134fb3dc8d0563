"""Resolve platform names (streams, users) to the internal stable keys every table uses."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.core.inbound import StreamKey, StreamKind
from pallas.store.database import Database
from pallas.store.models import Identity, Person, Stream
from pallas.store.sql import BoundedCache, insert_ignoring_conflicts


@dataclass(frozen=True)
class UserKey:
    platform: str
    user_id: str


@dataclass(frozen=True)
class KnownUser:
    person_id: int
    nickname: str


def chat_key(key: StreamKey) -> StreamKey:
    """The key a chat's row is found by: a group is every account's (its row keeps the
    account that saw it first), a private chat is one account's."""
    if key.kind is StreamKind.GROUP:
        return StreamKey(key.platform, "", key.kind, key.external_id)
    return key


def stream_where(platform: str, self_id: str, kind: str, external_id: str) -> list[Any]:
    """The conditions that find a chat's row (see chat_key)."""
    where = [Stream.platform == platform, Stream.kind == kind, Stream.external_id == external_id]
    if kind != StreamKind.GROUP.value:
        where.append(Stream.self_id == self_id)
    return where


class StreamResolver:
    """stream key -> stream.id, creating rows on first sight. Every account's key of a group
    finds the group's one row."""

    def __init__(self, cache_size: int = 10_000) -> None:
        self._cache: BoundedCache[StreamKey, int] = BoundedCache(cache_size)

    async def resolve(
        self, conn: AsyncConnection, keys: Iterable[StreamKey], now: datetime
    ) -> dict[StreamKey, int]:
        wanted = set(keys)
        found = {key: sid for key in wanted if (sid := self._cache.get(key)) is not None}
        missing = wanted - found.keys()
        if missing:
            table = Stream.__table__
            await conn.execute(
                insert_ignoring_conflicts(conn, table),  # type: ignore[arg-type]
                [_stream_row(key, now) for key in missing],
            )
            result = await conn.execute(
                select(
                    Stream.id, Stream.platform, Stream.self_id, Stream.kind, Stream.external_id
                ).where(Stream.external_id.in_({key.external_id for key in missing}))
            )
            rows = {chat_key(_key_of(row)): row.id for row in result}
            found.update({key: rows[chat_key(key)] for key in missing if chat_key(key) in rows})
        return found

    def remember(self, resolved: dict[StreamKey, int]) -> None:
        """Cache only what a committed transaction produced."""
        self._cache.put_all(resolved)


class PersonResolver:
    """(platform, user id) -> person.id, creating person + identity on first sight.

    A changed nickname is written back, so the person's display name follows the platform.
    """

    def __init__(self, cache_size: int = 50_000) -> None:
        self._cache: BoundedCache[UserKey, KnownUser] = BoundedCache(cache_size)

    async def resolve(
        self, conn: AsyncConnection, users: dict[UserKey, str], now: datetime
    ) -> dict[UserKey, KnownUser]:
        known = {key: hit for key in users if (hit := self._cache.get(key)) is not None}
        missing = {key: name for key, name in users.items() if key not in known}
        if missing:
            known.update(await self._load(conn, missing.keys()))
            new = {key: name for key, name in missing.items() if key not in known}
            if new:
                known.update(await self._create(conn, new, now))
        return await self._refresh_names(conn, known, users)

    def remember(self, resolved: dict[UserKey, KnownUser]) -> None:
        self._cache.put_all(resolved)

    async def _load(
        self, conn: AsyncConnection, keys: Iterable[UserKey]
    ) -> dict[UserKey, KnownUser]:
        wanted = set(keys)
        result = await conn.execute(
            select(
                Identity.platform, Identity.user_id, Identity.person_id, Identity.nickname
            ).where(Identity.user_id.in_({key.user_id for key in wanted}))
        )
        loaded = {}
        for row in result:
            key = UserKey(row.platform, row.user_id)
            if key in wanted:
                loaded[key] = KnownUser(row.person_id, row.nickname)
        return loaded

    async def _create(
        self, conn: AsyncConnection, new: dict[UserKey, str], now: datetime
    ) -> dict[UserKey, KnownUser]:
        keys = list(new)
        people = await conn.execute(
            insert(Person).returning(Person.id, sort_by_parameter_order=True),
            [{"display_name": new[key], "created_at": now} for key in keys],
        )
        person_ids = [row.id for row in people]
        await conn.execute(
            insert_ignoring_conflicts(conn, Identity.__table__),  # type: ignore[arg-type]
            [
                {
                    "platform": key.platform,
                    "user_id": key.user_id,
                    "person_id": pid,
                    "nickname": new[key],
                    "created_at": now,
                }
                for key, pid in zip(keys, person_ids, strict=True)
            ],
        )
        # Re-read: an identity created elsewhere meanwhile wins over the one just made.
        return await self._load(conn, keys)

    async def _refresh_names(
        self, conn: AsyncConnection, known: dict[UserKey, KnownUser], names: dict[UserKey, str]
    ) -> dict[UserKey, KnownUser]:
        refreshed = {}
        for key, user in known.items():
            name = names.get(key, "")
            if name and name != user.nickname:
                await conn.execute(
                    update(Identity)
                    .where(Identity.platform == key.platform, Identity.user_id == key.user_id)
                    .values(nickname=name)
                )
                await conn.execute(
                    update(Person).where(Person.id == user.person_id).values(display_name=name)
                )
                user = KnownUser(user.person_id, name)
            refreshed[key] = user
        return refreshed


async def unknown_user_ids(engine: AsyncEngine, platform: str, user_ids: Iterable[str]) -> set[str]:
    """The ids among `user_ids` the store has never seen."""
    wanted = set(user_ids)
    if not wanted:
        return set()
    query = select(Identity.user_id).where(
        Identity.platform == platform, Identity.user_id.in_(wanted)
    )
    async with engine.connect() as conn:
        known = set((await conn.execute(query)).scalars())
    return wanted - known


def _key_of(row: Any) -> StreamKey:
    return StreamKey(row.platform, row.self_id, StreamKind(row.kind), row.external_id)


def _stream_row(key: StreamKey, now: datetime) -> dict[str, object]:
    return {
        "platform": key.platform,
        "self_id": key.self_id,
        "kind": key.kind.value,
        "external_id": key.external_id,
        "name": "",
        "created_at": now,
    }


async def ensure_stream(
    engine: AsyncEngine, key: StreamKey, now: datetime
) -> int:
    """The stream row of a chat the bot starts itself (a private message to an owner)."""
    async with Database.of(engine).write() as conn:
        return (await StreamResolver().resolve(conn, [key], now))[key]


async def person_ids(engine: AsyncEngine, platform: str, user_ids: Iterable[str]) -> dict[str, int]:
    """Platform user id -> person id, for the ids the store knows."""
    wanted = {u for u in user_ids if u}
    if not wanted:
        return {}
    query = select(Identity.user_id, Identity.person_id).where(
        Identity.platform == platform, Identity.user_id.in_(wanted)
    )
    async with engine.connect() as conn:
        return {row.user_id: int(row.person_id) for row in await conn.execute(query)}
