"""Groups several accounts of the bot sit in: which accounts are there, and the same QQ
message or notice seen through each of them recognised as one (docs/accounts.md).

QQ keeps a message's sequence number (NapCat's `real_seq`) the same for every account, while
each NapCat gives it an id of its own; the timeline stores the message once, under the first
copy's id, and keeps every other account's id as a `message_copy`. Without a sequence number
(another platform, a poke) the same sender, text and time within COPY_WINDOW_S from another
account is the same message: the window covers NapCat instances whose clocks disagree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pallas.store.models import Event, Identity, Message, MessageCopy, StreamAccount
from pallas.store.sql import insert_ignoring_conflicts

COPY_WINDOW_S = 10.0  # two NapCat clocks may disagree by seconds (a poke carries local time)
NOTICE_WINDOW_S = 30.0  # the same join or leave reported by each account


@dataclass(frozen=True)
class CopyOf:
    """A message already stored that this delivery is another account's copy of."""

    message_id: int
    self_id: str
    platform_message_id: str


class GroupAccounts:
    """Which accounts each group is seen through, kept by the timeline writer: the store's
    `stream_account` rows, written on an account's first sight of a group in a run."""

    def __init__(self) -> None:
        self._present: dict[int, set[str]] = {}
        self._pending: dict[int, set[str]] = {}

    def several(self, stream_id: int) -> bool:
        return len(self._accounts_of(stream_id)) > 1

    def is_present(self, stream_id: int, user_id: str) -> bool:
        """Whether the user is one of the bot's accounts in the group."""
        return user_id in self._accounts_of(stream_id)

    def _accounts_of(self, stream_id: int) -> set[str]:
        pending = self._pending.get(stream_id)
        return pending if pending is not None else self._present.get(stream_id, set())

    async def saw(self, conn: AsyncConnection, stream_id: int, self_id: str, now: datetime) -> None:
        """The account saw the group: recorded once per run (and again after it left)."""
        if self_id in self._accounts_of(stream_id) or not self_id:
            return
        await conn.execute(
            insert_ignoring_conflicts(conn, StreamAccount.__table__),  # type: ignore[arg-type]
            [{"stream_id": stream_id, "self_id": self_id, "first_seen_at": now,
              "last_seen_at": now, "left_at": None}],
        )
        await conn.execute(
            update(StreamAccount)
            .where(StreamAccount.stream_id == stream_id, StreamAccount.self_id == self_id)
            .values(last_seen_at=now, left_at=None)
        )
        present = await _present(conn, stream_id)
        self._pending[stream_id] = present | {self_id}

    async def left(
        self, conn: AsyncConnection, stream_id: int, self_id: str, now: datetime
    ) -> None:
        """The account was removed from the group (kicked, or it left)."""
        await conn.execute(
            update(StreamAccount)
            .where(StreamAccount.stream_id == stream_id, StreamAccount.self_id == self_id)
            .values(left_at=now)
        )
        self._pending[stream_id] = self._accounts_of(stream_id) - {self_id}

    def committed(self) -> None:
        self._present.update(self._pending)
        self._pending.clear()

    def rolled_back(self) -> None:
        self._pending.clear()


async def _present(conn: AsyncConnection, stream_id: int) -> set[str]:
    query = select(StreamAccount.self_id).where(
        StreamAccount.stream_id == stream_id, StreamAccount.left_at.is_(None)
    )
    return set((await conn.execute(query)).scalars())


async def copies_by_seq(
    conn: AsyncConnection, wanted: Iterable[tuple[int, str]]
) -> dict[tuple[int, str], int]:
    """(stream id, seq key) -> the stored message with that QQ sequence number."""
    keys = set(wanted)
    if not keys:
        return {}
    query = select(Message.id, Message.stream_id, Message.seq_key).where(
        Message.stream_id.in_({sid for sid, _ in keys}),  # the (stream_id, seq_key) index
        Message.seq_key.in_({seq for _, seq in keys}),
    )
    found = {(r.stream_id, r.seq_key): r.id for r in await conn.execute(query)}
    return {key: found[key] for key in keys if key in found}


async def copy_by_content(conn: AsyncConnection, row: dict[str, Any]) -> int | None:
    """The stored message another account delivered with the same sender, text and time
    (one of the copies may carry no sequence number: the bot's own send, as its receipt
    recorded it)."""
    window = timedelta(seconds=COPY_WINDOW_S)
    query = (
        select(Message.id)
        .where(
            Message.stream_id == row["stream_id"],
            Message.sender_person_id == row["sender_person_id"],
            Message.text == row["text"],
            Message.time.between(row["time"] - window, row["time"] + window),
            or_(Message.account.is_(None), Message.account != row["account"]),
            *_same_sequence(row["seq_key"]),
        )
        .order_by(Message.id.desc())
        .limit(1)
    )
    return await conn.scalar(query)


def _same_sequence(seq_key: str | None) -> list[Any]:
    """Two messages with different QQ sequence numbers are two messages, however alike."""
    if seq_key is None:
        return []
    return [or_(Message.seq_key.is_(None), Message.seq_key == seq_key)]


async def keep_copies(conn: AsyncConnection, copies: Iterable[CopyOf]) -> None:
    rows = [
        {"message_id": c.message_id, "self_id": c.self_id,
         "platform_message_id": c.platform_message_id}
        for c in copies
    ]
    if rows:
        table = MessageCopy.__table__
        await conn.execute(insert_ignoring_conflicts(conn, table), rows)  # type: ignore[arg-type]


async def learn_sequence(
    conn: AsyncConnection, message_id: int, stream_id: int, seq_key: str
) -> None:
    """A row stored without QQ's sequence number (the bot's send, from its receipt) takes it
    from the platform's echo: another account's copy then finds it by the number."""
    taken = (
        select(Message.id)
        .where(Message.stream_id == stream_id, Message.seq_key == seq_key)
        .exists()
    )
    await conn.execute(
        update(Message)
        .where(Message.id == message_id, Message.seq_key.is_(None), ~taken)
        .values(seq_key=seq_key)
    )


async def stored_id_of(conn: AsyncConnection, stream_id: int, platform_id: str) -> str | None:
    """The id a message is stored under, named by another account's id for it."""
    found = await message_by_copy(conn, stream_id, platform_id)
    return None if found is None else found[2]


async def message_by_copy(
    conn: AsyncConnection, stream_id: int, platform_id: str
) -> tuple[int, bool, str] | None:
    """(message id, from the bot, the id it is stored under) of the message another
    account's id names."""
    query = (
        select(Message.id, Message.from_bot, Message.platform_message_id)
        .join(MessageCopy, MessageCopy.message_id == Message.id)
        .where(Message.stream_id == stream_id, MessageCopy.platform_message_id == platform_id)
        .limit(1)
    )
    row = (await conn.execute(query)).first()
    return None if row is None else (int(row.id), bool(row.from_bot), str(row.platform_message_id))


async def notice_seen(
    conn: AsyncConnection, events: list[dict[str, Any]], probe: dict[str, Any]
) -> bool:
    """Whether another account already reported this join or leave (in this batch or in
    the last NOTICE_WINDOW_S)."""

    def same(event: dict[str, Any]) -> bool:
        return (
            event["kind"] == probe["kind"]
            and event["stream_id"] == probe["stream_id"]
            and event["person_id"] == probe["person_id"]
            and event["payload"].get("account") != probe["payload"].get("account")
        )

    if any(same(e) for e in events):
        return True
    since = probe["created_at"] - timedelta(seconds=NOTICE_WINDOW_S)
    query = select(Event.payload).where(
        Event.kind == probe["kind"],
        Event.stream_id == probe["stream_id"],
        Event.person_id == probe["person_id"],
        Event.created_at >= since,
    )
    payloads = (await conn.execute(query)).scalars()
    return any(p.get("account") != probe["payload"].get("account") for p in payloads)


@dataclass(frozen=True)
class Quoted:
    """A stored message as another message's quote names it."""

    message_id: int
    platform_message_id: str  # the id it is stored under (its first copy's)
    from_bot: bool
    sender: str  # the sender's platform id (for the bot's own: the account that said it)
    account: str | None = None  # the account whose id it is stored under


async def quoted(engine: AsyncEngine, stream_id: int, platform_id: str) -> Quoted | None:
    """The message a quote names by any account's id for it."""
    sender = (
        select(Identity.user_id)
        .where(Identity.person_id == Message.sender_person_id)
        .order_by(Identity.id)
        .limit(1)
        .scalar_subquery()
    )
    columns = (Message.id, Message.platform_message_id, Message.from_bot, sender.label("sender"),
               Message.account)  # fmt: skip
    direct = select(*columns).where(
        Message.stream_id == stream_id, Message.platform_message_id == platform_id
    )
    by_copy = (
        select(*columns)
        .join(MessageCopy, MessageCopy.message_id == Message.id)
        .where(Message.stream_id == stream_id, MessageCopy.platform_message_id == platform_id)
    )
    async with engine.connect() as conn:
        row = (await conn.execute(direct.limit(1))).first()
        if row is None:
            row = (await conn.execute(by_copy.limit(1))).first()
    if row is None:
        return None
    return Quoted(int(row.id), str(row.platform_message_id), bool(row.from_bot), str(row.sender),
                  row.account)  # fmt: skip


async def id_for_account(
    engine: AsyncEngine, stream_id: int, platform_id: str, account: str
) -> str | None:
    """The id `account`'s NapCat knows the message `platform_id` names by: the same id when
    the store does not know the message, None when that account never saw it."""
    found = await quoted(engine, stream_id, platform_id)
    if found is None:
        return platform_id
    if found.account in (None, account):
        return found.platform_message_id
    async with engine.connect() as conn:
        return await _copy_id(conn, found.message_id, account)


async def own_id_of(
    engine: AsyncEngine, message_id: int, self_id: str
) -> str | None:
    """The id the account's NapCat knows a stored message by (a quote names it so)."""
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(Message.platform_message_id, Message.account).where(
                    Message.id == message_id
                )
            )
        ).first()
        if row is None:
            return None
        if row.account in (None, self_id):
            return str(row.platform_message_id)
        return await _copy_id(conn, message_id, self_id)


async def _copy_id(conn: AsyncConnection, message_id: int, self_id: str) -> str | None:
    """The account's own id for a message another account's copy is stored under."""
    copy = await conn.scalar(
        select(MessageCopy.platform_message_id).where(
            MessageCopy.message_id == message_id, MessageCopy.self_id == self_id
        )
    )
    return None if copy is None else str(copy)
