"""The durable outbox: replies and every outgoing action, with their delivery state.

    pending --(dispatcher takes it)--> sending --(platform receipt)--> sent
       ^            |                     |
       +--retry-----+ (error, backoff)    +--(crash: outcome unknown)--> see recover()
    final states: sent, failed, unknown, expired

A reply and its rows are committed in one transaction. A row is marked `sending` (committed)
before the platform is called, so a crash in between is visible at start-up.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import String, and_, bindparam, func, insert, literal_column, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.orm import aliased

from pallas.core.actions import Origin, OutboxKind
from pallas.core.inbound import StreamKey, StreamKind
from pallas.store.database import Database
from pallas.store.models import Identity, Message, OutboxItem, Reply, Stream
from pallas.store.origins import spoken

MAX_ERROR_CHARS = 300


class OutboxStatus(StrEnum):
    PENDING = "pending"
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"
    UNKNOWN = "unknown"
    EXPIRED = "expired"
    DROPPED = "dropped"  # an unsolicited reply given up for a crowded queue or a direct call


OPEN = (OutboxStatus.PENDING.value, OutboxStatus.SENDING.value)


@dataclass(frozen=True)
class NewItem:
    kind: OutboxKind
    payload: dict[str, Any]
    delay_s: float = 0.0  # after the previous item of the same reply (pacing)


@dataclass(frozen=True)
class DroppedRow:
    id: int
    turn_id: int | None
    reply_id: int | None


@dataclass(frozen=True)
class Enqueued:
    ids: list[int]  # the new rows, in sending order
    dropped: list[DroppedRow]  # older unsolicited rows given up to make room (see enqueue)
    created: bool = True  # False: the idempotency key was queued before; `ids` are those rows


@dataclass(frozen=True)
class OutboxRow:
    id: int
    reply_id: int | None
    turn_id: int | None
    stream_id: int
    stream: StreamKey
    kind: str
    payload: dict[str, Any]
    status: str
    attempts: int
    not_before: datetime
    created_at: datetime
    updated_at: datetime  # for a `sending` row: when the send began
    origin: str = Origin.AGENT_REPLY
    stream_since: datetime | None = None  # when the bot first saw the chat (a new group's warm-up)
    # The account it was queued for; None: the group's speaker when it goes. `stream.self_id`
    # is the account it goes through (this one, else the one the chat's row keeps).
    account: str | None = None
    holder: str | None = None  # a `sending` row: the process sending it (docs/scaling.md)


class OutboxStore:
    def __init__(self, engine: AsyncEngine, holder: str | None = None) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()
        self.holder = holder  # this process's name, kept on the rows it takes for sending

    async def enqueue(
        self,
        turn_id: int | None,
        stream_id: int,
        items: Sequence[NewItem],
        now: datetime,
        *,
        bubbles: Sequence[str] = (),
        quote: str | None = None,
        direct: bool = False,
        max_waiting: int | None = None,
        key: str | None = None,
        origin: Origin = Origin.AGENT_REPLY,
        account: str | None = None,
    ) -> Enqueued:
        """The reply record (when there are bubbles) and its rows, in one transaction.

        Backpressure, in the same transaction: a `direct` reply (one answering an @, a reply,
        a poke, a private message) drops every unsolicited reply of the chat that is still
        waiting to start, so it never queues behind them; an unsolicited one drops the oldest
        waiting unsolicited replies so that at most `max_waiting` wait, itself included. The
        reply at the head of the chat (it may have begun) and direct replies are never
        dropped.

        With a `key`, the rows are queued at most once: a second call with the same key (a
        responder run again for the same message after a crash) returns the first rows.
        """
        keys = item_keys(key, len(items))
        async with self._writes.begin() as conn:
            if keys:
                existing = await _keyed_rows(conn, keys)
                if existing:
                    return Enqueued(existing, [], created=False)
            reply_id = None
            if bubbles:
                result = await conn.execute(
                    insert(Reply).values(
                        turn_id=turn_id,
                        stream_id=stream_id,
                        bubbles=list(bubbles),
                        quote=quote,
                        created_at=now,
                    )
                )
                reply_id = int(result.inserted_primary_key[0])
            ids, due = [], now
            for item in items:
                due += timedelta(seconds=item.delay_s)
                values = _row(reply_id, turn_id, stream_id, item, due, now)
                values |= {"direct": direct, "origin": origin.value, "account": account}
                if keys:
                    values["idempotency_key"] = keys[len(ids)]
                result = await conn.execute(insert(OutboxItem).values(**values))
                ids.append(int(result.inserted_primary_key[0]))
            dropped = []
            if reply_id is not None and (direct or max_waiting is not None):
                # The others that may keep waiting beside this one.
                others = 0 if direct or max_waiting is None else max(0, max_waiting - 1)
                dropped = await _make_room(conn, stream_id, reply_id, others, now)
        return Enqueued(ids, dropped)

    async def heads(self, limit: int = 200) -> list[OutboxRow]:
        """The oldest open row of each stream (its order is strict), oldest streams first.

        The statement skips from one chat to the next along the open rows' index, so it costs
        a few index searches per chat with open rows, however deep their backlogs are.
        """
        async with self._engine.connect() as conn:
            rows = (await conn.execute(_HEADS, {"limit": limit})).all()
        return [_outbox_row(row) for row in rows]

    async def waiting_messages(self, stream_id: int) -> int:
        """Bubbles of the chat's conversation queued but not yet sent (the frequency cap
        counts them; a command's answer or a welcome waiting in the queue does not count)."""
        query = (
            select(func.count())
            .select_from(OutboxItem)
            .where(
                OutboxItem.stream_id == stream_id,
                OutboxItem.status.in_(OPEN),
                OutboxItem.kind == OutboxKind.MESSAGE.value,
                spoken(OutboxItem.origin),
            )
        )
        async with self._engine.connect() as conn:
            return int((await conn.execute(query)).scalar() or 0)

    async def open_pokes(self, stream_id: int) -> list[tuple[str, datetime]]:
        """Pokes of the chat queued but not yet confirmed: (target, queued at). A limit that
        counts the bot's pokes must count these too, or two quick pokes both pass it."""
        query = select(OutboxItem.payload, OutboxItem.created_at).where(
            OutboxItem.stream_id == stream_id,
            OutboxItem.status.in_(OPEN),
            OutboxItem.kind == OutboxKind.POKE.value,
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query.order_by(OutboxItem.id))).all()
        return [(str(row.payload.get("user_id", "")), row.created_at) for row in rows]

    async def open_count(self) -> int:
        query = select(func.count()).select_from(OutboxItem).where(OutboxItem.status.in_(OPEN))
        async with self._engine.connect() as conn:
            return int((await conn.execute(query)).scalar() or 0)

    async def set_account(self, item_id: int, account: str) -> None:
        """The account a row goes through; its status and times stay (a retry's echo window
        is measured from `updated_at`)."""
        statement = update(OutboxItem).where(OutboxItem.id == item_id).values(account=account)
        async with self._writes.begin() as conn:
            await conn.execute(statement)

    async def mark(
        self, item_id: int, status: OutboxStatus, now: datetime, *, taken: bool = False,
        **values: Any,
    ) -> None:
        """Set the row's status. `taken`: the outcome of this process's own send, written
        only while the row is still `sending` under its name (a process woken from a pause
        may find it settled by another since)."""
        if "last_error" in values:
            values["last_error"] = str(values["last_error"])[:MAX_ERROR_CHARS]
        statement = (
            update(OutboxItem)
            .where(OutboxItem.id == item_id)
            .values(status=status.value, updated_at=now, **values)
        )
        if taken:
            statement = statement.where(
                OutboxItem.status == OutboxStatus.SENDING.value,
                OutboxItem.holder.is_not_distinct_from(self.holder),
            )
        async with self._writes.begin() as conn:
            await conn.execute(statement)

    async def mark_sending(self, item_ids: Sequence[int], now: datetime) -> list[int]:
        """Rows about to be handed to the platform together, taken from `pending` in one
        transaction; the ids taken. A row no longer pending (another process sharing the
        store took it first) is not taken, so no row is sent by two processes."""
        statement = (
            update(OutboxItem)
            .where(OutboxItem.id.in_(item_ids), OutboxItem.status == OutboxStatus.PENDING.value)
            .values(status=OutboxStatus.SENDING.value, updated_at=now, holder=self.holder)
            .returning(OutboxItem.id)
        )
        async with self._writes.begin() as conn:
            return [int(i) for i in (await conn.execute(statement)).scalars()]

    async def mark_sent(self, receipts: Sequence[tuple[int, str]], now: datetime) -> None:
        """(row id, platform message id) of rows the platform confirmed: one transaction."""
        params = [
            {"row": row, "pid": pid, "now": now, "by": self.holder} for row, pid in receipts
        ]
        async with self._writes.begin() as conn:
            await conn.execute(_MARK_SENT, params)

    async def statuses(self, item_ids: Sequence[int]) -> dict[int, str]:
        """Where each of these rows stands now (a row that does not exist is left out)."""
        query = select(OutboxItem.id, OutboxItem.status).where(OutboxItem.id.in_(list(item_ids)))
        async with self._engine.connect() as conn:
            return {int(i): str(status) for i, status in await conn.execute(query)}

    async def interrupted(self) -> list[OutboxRow]:
        """Rows that were being sent when the process stopped."""
        query = _row_query().where(OutboxItem.status == OutboxStatus.SENDING.value)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query.order_by(OutboxItem.id))).all()
        return [_outbox_row(row) for row in rows]

    async def key_of_sent(self, stream_id: int, platform_message_id: str) -> str | None:
        """The idempotency key of the row the platform confirmed under this id: which part
        of the bot said it, and for what (a learned line's pair)."""
        query = select(OutboxItem.idempotency_key).where(
            OutboxItem.stream_id == stream_id,
            OutboxItem.platform_message_id == platform_message_id,
        )
        async with self._engine.connect() as conn:
            return await conn.scalar(query.limit(1))

    async def known_user_ids(self, platform: str, candidates: Iterable[str]) -> frozenset[str]:
        """Which of these numbers are user ids of people the bot has seen (the outgoing screen
        masks them)."""
        query = select(Identity.user_id).where(
            Identity.platform == platform, Identity.user_id.in_(sorted(set(candidates)))
        )
        async with self._engine.connect() as conn:
            return frozenset((await conn.execute(query)).scalars())

    async def asker_ids(self, platform: str, turn_id: int | None) -> frozenset[str]:
        """The user ids of whoever wrote the messages of this turn: their own numbers are
        theirs to hear."""
        if turn_id is None:
            return frozenset()
        query = (
            select(Identity.user_id)
            .join(Message, Message.sender_person_id == Identity.person_id)
            .where(Message.turn_id == turn_id, Identity.platform == platform)
        )
        async with self._engine.connect() as conn:
            return frozenset((await conn.execute(query)).scalars())

    async def sent_since(self, since: datetime) -> list[OutboxRow]:
        """Rows confirmed sent since `since`, oldest first: an account's last hour survives a
        restart (the account pace starts from them)."""
        query = _row_query().where(
            OutboxItem.status == OutboxStatus.SENT.value, OutboxItem.updated_at >= since
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query.order_by(OutboxItem.updated_at))).all()
        return [_outbox_row(row) for row in rows]

    async def unclaimed_echo(self, stream_id: int, text: str, since: datetime) -> str | None:
        """A bot message with this text stored since `since` that no outbox row has claimed:
        the platform's report of a send whose receipt was lost."""
        claimed = select(OutboxItem.platform_message_id).where(
            OutboxItem.stream_id == stream_id, OutboxItem.platform_message_id.is_not(None)
        )
        query = (
            select(Message.platform_message_id)
            .where(
                and_(
                    Message.stream_id == stream_id,
                    Message.from_bot.is_(True),
                    Message.text == text,
                    Message.stored_at >= since,
                    Message.platform_message_id.not_in(claimed),
                )
            )
            .order_by(Message.id)
            .limit(1)
        )
        async with self._engine.connect() as conn:
            return (await conn.execute(query)).scalar()


# Only while still `sending` under this process's name (see `mark`'s `taken`).
_MARK_SENT = (
    update(OutboxItem)
    .where(
        OutboxItem.id == bindparam("row"),
        OutboxItem.status == OutboxStatus.SENDING.value,
        OutboxItem.holder.is_not_distinct_from(bindparam("by", type_=String(64))),
    )
    .values(
        status=OutboxStatus.SENT.value,
        updated_at=bindparam("now"),
        platform_message_id=bindparam("pid"),
    )
    .execution_options(synchronize_session=False)
)


def item_keys(key: str | None, count: int) -> list[str]:
    """One key per row: the key itself for the first, `key#i` for the i-th after it."""
    if key is None:
        return []
    return [key if i == 0 else f"{key}#{i}" for i in range(count)]


async def _keyed_rows(conn: AsyncConnection, keys: list[str]) -> list[int]:
    query = select(OutboxItem.id).where(OutboxItem.idempotency_key.in_(keys))
    return [int(i) for i in (await conn.execute(query.order_by(OutboxItem.id))).scalars()]


async def _make_room(
    conn: AsyncConnection, stream_id: int, new_reply: int, limit: int, now: datetime
) -> list[DroppedRow]:
    """Drop the oldest waiting unsolicited replies of the chat beyond `limit` (new one aside).

    Only the chat's head row can have begun (rows go strictly in order), so every other
    open reply is still whole; the head's reply is never touched.
    """
    query = (
        select(OutboxItem.id, OutboxItem.turn_id, OutboxItem.reply_id, OutboxItem.direct)
        .where(OutboxItem.stream_id == stream_id, OutboxItem.status.in_(OPEN))
        .order_by(OutboxItem.id)
    )
    rows = (await conn.execute(query)).all()
    if not rows:
        return []
    head_reply = rows[0].reply_id
    waiting = [r for r in rows if not r.direct and r.reply_id not in (None, head_reply, new_reply)]
    replies = list(dict.fromkeys(r.reply_id for r in waiting))  # oldest first
    doomed = set(replies[: max(0, len(replies) - limit)])
    victims = [DroppedRow(r.id, r.turn_id, r.reply_id) for r in waiting if r.reply_id in doomed]
    if victims:
        await conn.execute(
            update(OutboxItem)
            .where(OutboxItem.id.in_([v.id for v in victims]))
            .values(status=OutboxStatus.DROPPED.value, updated_at=now)
        )
    return victims


def _row(
    reply_id: int | None,
    turn_id: int | None,
    stream_id: int,
    item: NewItem,
    due: datetime,
    now: datetime,
) -> dict[str, Any]:
    return {
        "reply_id": reply_id,
        "turn_id": turn_id,
        "stream_id": stream_id,
        "kind": OutboxKind(item.kind).value,
        "payload": item.payload,
        "status": OutboxStatus.PENDING.value,
        "attempts": 0,
        "not_before": due,
        "created_at": now,
        "updated_at": now,
        "last_error": "",
    }


def _row_query() -> Any:
    return select(
        OutboxItem.id,
        OutboxItem.reply_id,
        OutboxItem.turn_id,
        OutboxItem.stream_id,
        OutboxItem.kind,
        OutboxItem.payload,
        OutboxItem.status,
        OutboxItem.attempts,
        OutboxItem.not_before,
        OutboxItem.created_at,
        OutboxItem.updated_at,
        OutboxItem.origin,
        OutboxItem.account,
        OutboxItem.holder,
        Stream.platform,
        Stream.self_id,
        Stream.kind.label("stream_kind"),
        Stream.external_id,
        Stream.created_at.label("stream_since"),
    ).join(Stream, Stream.id == OutboxItem.stream_id)


def _outbox_row(row: Any) -> OutboxRow:
    return OutboxRow(
        id=row.id,
        reply_id=row.reply_id,
        turn_id=row.turn_id,
        stream_id=row.stream_id,
        stream=StreamKey(
            row.platform, row.account or row.self_id, StreamKind(row.stream_kind), row.external_id
        ),
        kind=row.kind,
        payload=dict(row.payload),
        status=row.status,
        attempts=row.attempts,
        not_before=row.not_before,
        created_at=row.created_at,
        updated_at=row.updated_at,
        origin=row.origin,
        stream_since=row.stream_since,
        account=row.account,
        holder=row.holder,
    )


def _heads_query() -> Any:
    """Each chat's oldest open row: a loose index scan over `ix_outbox_open_stream_id_id`.

    The recursive part walks the chats with open rows in stream id order, one index search
    for the next one each; then each chat's first open row is one more search. A GROUP BY
    over the open rows would read every row of every backlog instead.
    """
    chats = select(func.min(OutboxItem.stream_id).label("sid")).where(_open(OutboxItem))
    chats_cte = chats.cte("open_chat", recursive=True)
    after = aliased(OutboxItem)
    next_chat = (
        select(func.min(after.stream_id))
        .where(_open(after), after.stream_id > chats_cte.c.sid)
        .scalar_subquery()
    )
    chats_cte = chats_cte.union_all(select(next_chat).where(chats_cte.c.sid.is_not(None)))
    first = aliased(OutboxItem)
    head = (
        select(func.min(first.id))
        .where(_open(first), first.stream_id == chats_cte.c.sid)
        .scalar_subquery()
    )
    head_ids = select(head.label("head")).where(chats_cte.c.sid.is_not(None)).subquery()
    return (
        _row_query()
        .join(head_ids, head_ids.c.head == OutboxItem.id)
        .order_by(OutboxItem.id)
        .limit(bindparam("limit"))
    )


def _open(table: Any) -> Any:
    """`status IN ('pending', 'sending')` in constants, as the partial index states it: neither
    SQLite nor PostgreSQL matches a partial index to a condition on bound parameters."""
    return table.status.in_([literal_column(f"'{status}'") for status in OPEN])


_HEADS = _heads_query()
