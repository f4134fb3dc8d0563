"""What the turn kernel keeps in the store: recent activity, stream state and policy, and
admitted messages no turn has consumed yet (re-buffered after a restart)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import aliased

from pallas.core.inbound import InboundMessage, Segment, Sender, StreamKey, StreamKind
from pallas.store.audit import MESSAGE_DECISIONS, TURN_ENDINGS, EventKind
from pallas.store.database import Database
from pallas.store.models import (
    Event,
    Identity,
    Message,
    OutboxItem,
    Stream,
    StreamPolicy,
    StreamState,
)
from pallas.store.processes import EVERYONE, Owners
from pallas.store.sql import upsert

RECOVERY_HORIZON = timedelta(hours=24)  # how far back recovery looks for cut paths


@dataclass(frozen=True)
class RecentRow:
    message_id: int
    platform_message_id: str
    person_id: int
    stored_at: datetime
    from_bot: bool
    is_poke: bool
    mentions: tuple[str, ...]
    reply_to: str | None
    origin: str | None  # the bot's own message: which part of the bot sent it


@dataclass(frozen=True)
class PendingRow:
    """A message the gate let through that no turn has consumed yet."""

    message_id: int
    stream_id: int
    person_id: int
    message: InboundMessage
    payload: dict[str, Any]
    stored_at: datetime | None = None


async def max_turn_id(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        in_ledger = (await conn.execute(select(func.max(Event.turn_id)))).scalar()
        in_timeline = (await conn.execute(select(func.max(Message.turn_id)))).scalar()
        # A responder's action may have queued rows before its audit event was committed.
        in_outbox = (await conn.execute(select(func.max(OutboxItem.turn_id)))).scalar()
    return max(in_ledger or 0, in_timeline or 0, in_outbox or 0)


async def recent_rows(engine: AsyncEngine, stream_id: int, since: datetime) -> list[RecentRow]:
    query = (
        select(
            Message.id,
            Message.platform_message_id,
            Message.sender_person_id,
            Message.stored_at,
            Message.from_bot,
            Message.is_poke,
            Message.mentions,
            Message.reply_to,
            Message.origin,
        )
        .where(Message.stream_id == stream_id, Message.stored_at >= since)
        .order_by(Message.id)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [
        RecentRow(r[0], r[1], r[2], r[3], r[4], r[5], tuple(r[6] or ()), r[7], r[8]) for r in rows
    ]


async def ambient_passes(engine: AsyncEngine, stream_id: int, since: datetime) -> list[datetime]:
    query = select(Event.created_at).where(
        Event.stream_id == stream_id,
        Event.kind == EventKind.TURN_STARTED,
        Event.reason == "ambient",
        Event.created_at >= since,
    )
    async with engine.connect() as conn:
        return [value for value in (await conn.execute(query)).scalars()]


async def follow_up_declined(engine: AsyncEngine, stream_id: int) -> bool:
    query = select(StreamState.follow_up_declined).where(StreamState.stream_id == stream_id)
    async with engine.connect() as conn:
        return bool((await conn.execute(query)).scalar())


async def policy_overrides(engine: AsyncEngine, stream_id: int) -> dict[str, Any] | None:
    query = select(StreamPolicy.overrides).where(StreamPolicy.stream_id == stream_id)
    async with engine.connect() as conn:
        return (await conn.execute(query)).scalar()


async def save_policy_overrides(
    engine: AsyncEngine, stream_id: int, overrides: dict[str, Any], now: datetime
) -> None:
    async with Database.of(engine).write() as conn:
        await conn.execute(
            upsert(
                conn,
                StreamPolicy.__table__,
                ["stream_id"],
                {  # type: ignore[arg-type]
                    "stream_id": stream_id,
                    "overrides": overrides,
                    "updated_at": now,
                },
            )
        )


async def message_text(engine: AsyncEngine, stream_id: int, platform_message_id: str) -> str:
    """A stored message's text ("" when it is not in the timeline)."""
    query = select(Message.text).where(
        Message.stream_id == stream_id, Message.platform_message_id == platform_message_id
    )
    async with engine.connect() as conn:
        return str((await conn.execute(query.limit(1))).scalar() or "")


async def is_bot_message(engine: AsyncEngine, stream_id: int, platform_message_id: str) -> bool:
    query = select(Message.from_bot).where(
        Message.stream_id == stream_id, Message.platform_message_id == platform_message_id
    )
    async with engine.connect() as conn:
        return bool((await conn.execute(query)).scalar())


async def unconsumed_admitted(
    engine: AsyncEngine,
    since: datetime,
    until: datetime | None = None,
    *,
    owed: Collection[int] = (),
    horizon: datetime | None = None,
    owners: Owners = EVERYONE,
) -> list[PendingRow]:
    """Admitted messages no turn holds, stored in [since, until). `owed` (messages a retry
    is owed to, see `owed_retries`) are included whatever their age when `until` is None,
    and left out otherwise; `horizon` bounds how far back ended messages are looked for."""
    stored = Message.stored_at >= since
    if until is not None:
        stored = stored & (Message.stored_at < until) & Message.id.not_in(list(owed))
    elif owed:
        stored = stored | Message.id.in_(list(owed))
    owned = owners.clause()
    if owned is not None:  # another live process buffers its own
        stored = stored & owned
    query = (
        select(Message, Stream, Identity.user_id, Identity.nickname, Event.payload)
        .join(Stream, Stream.id == Message.stream_id)
        .join(Identity, Identity.person_id == Message.sender_person_id)
        .join(Event, (Event.message_id == Message.id) & (Event.kind == EventKind.GATE_PASSED))
        .where(
            Message.turn_id.is_(None),
            stored,
            # Passed at ingress but ended afterwards (its buffer overflowed, or a retry owed
            # to it was given up): not waiting.
            Message.id.not_in(
                select(Event.message_id).where(
                    _ends_a_waiting_message(),
                    Event.message_id.is_not(None),
                    Event.created_at >= (horizon or since),
                )
            ),
        )
        .order_by(Message.id)
    )
    async with AsyncSession(engine) as session:  # ORM rows: whole Message and Stream objects
        rows = (await session.execute(query)).all()
    return [_pending(*row) for row in rows]


def _pending(
    msg: Message, stream: Stream, user_id: str, nickname: str, payload: dict[str, Any]
) -> PendingRow:
    # A group's row keeps the account that saw it first; the message, the one that answers
    # it (the gate recorded it), else the one that delivered it (docs/accounts.md).
    account = str(payload.get("account") or msg.account or stream.self_id)
    if stream.kind != StreamKind.GROUP.value:
        account = stream.self_id
    inbound = InboundMessage(
        stream=StreamKey(stream.platform, account, StreamKind(stream.kind), stream.external_id),
        sender=Sender(user_id=user_id, nickname=nickname),
        platform_message_id=msg.platform_message_id,
        time=msg.time,
        segments=tuple(Segment.from_json(seg) for seg in msg.segments),
        text=msg.text,
        reply_to=msg.reply_to,
        mentions=tuple(msg.mentions),
        mentions_all=msg.mentions_all,
        is_poke=msg.is_poke,
        from_bot=msg.from_bot,
        truncated=msg.truncated,
    )
    return PendingRow(msg.id, msg.stream_id, msg.sender_person_id, inbound, payload, msg.stored_at)


# -- start-up recovery (pallas/product/conversation/turns/recovery.py) -----------------

_started = aliased(Event)

# The events that end a turn; a turn_started with none of them was cut off by a crash.


@dataclass(frozen=True)
class StartedTurn:
    turn_id: int
    stream_id: int | None
    created_at: datetime
    message_id: int | None  # the batch's newest message
    reason: str  # the batch gate's reason
    payload: dict[str, Any]


async def unfinished_turns(
    engine: AsyncEngine, since: datetime, owners: Owners = EVERYONE
) -> list[StartedTurn]:
    """Turns started since `since` that no event ended (nor a batch-gate drop), of the
    processes `owners` names: a turn is its messages' storer's (a process turns only what
    it stored), a turn without messages names its process in its payload."""
    ended = select(Event.id).where(
        Event.turn_id == _started.turn_id,
        (Event.kind.in_(TURN_ENDINGS)) | (Event.kind == EventKind.GATE_DROPPED),
    )
    query = (
        select(
            _started.turn_id,
            _started.stream_id,
            _started.created_at,
            _started.message_id,
            _started.reason,
            _started.payload,
            Message.stored_by,
        )
        .outerjoin(Message, Message.id == _started.message_id)
        .where(
            _started.kind == EventKind.TURN_STARTED,
            _started.created_at >= since,
            _started.turn_id.is_not(None),
            ~ended.exists(),
        )
        .order_by(_started.id)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [
        StartedTurn(r[0], r[1], r[2], r[3], r[4], dict(r[5] or {}))
        for r in rows
        if owners.holds(_turn_holder(r[5] or {}, r[6]))
    ]


def _turn_holder(payload: dict[str, Any], stored_by: str | None) -> str | None:
    """The process that ran a turn: named in its start, else (a turn started before
    processes had names) its newest message's storer."""
    return str(payload["holder"]) if payload.get("holder") else stored_by


async def turn_traces(engine: AsyncEngine, turn_id: int) -> tuple[bool, str | None]:
    """Whether the turn queued anything in the outbox, and what the agent decided, if known."""
    queued = select(OutboxItem.id).where(OutboxItem.turn_id == turn_id).limit(1)
    decided = (
        select(Event.reason)
        .where(Event.turn_id == turn_id, Event.kind == EventKind.AGENT_DECIDED)
        .order_by(Event.id.desc())
        .limit(1)
    )
    async with engine.connect() as conn:
        has_outbox = (await conn.execute(queued)).first() is not None
        decision = (await conn.execute(decided)).scalar()
    return has_outbox, decision


def _ends_a_waiting_message() -> ColumnElement[bool]:
    """Events that end a message no turn holds: a drop, or a retry owed to it given up."""
    given_up = (
        (Event.kind == EventKind.TURN_INTERRUPTED)
        & (Event.reason == "given_up")
        & Event.turn_id.is_(None)
    )
    return (Event.kind == EventKind.GATE_DROPPED) | given_up


@dataclass(frozen=True)
class RetryMark:
    """A `turn_interrupted` `retry`: the turn's messages were given back to run once more."""

    event_id: int
    turn_id: int
    stream_id: int | None
    marked_at: datetime
    message_ids: tuple[int, ...]


@dataclass(frozen=True)
class OwedRetry:
    """A retry mark whose messages no later turn took and nothing else ended."""

    mark: RetryMark
    message_ids: tuple[int, ...]  # the mark's messages still owed their run
    newest_stored_at: datetime  # when the newest of them was stored


async def retry_marks(
    engine: AsyncEngine, since: datetime, stream_id: int | None = None
) -> list[RetryMark]:
    query = select(
        Event.id, Event.turn_id, Event.stream_id, Event.created_at, Event.message_id, Event.payload
    ).where(
        Event.kind == EventKind.TURN_INTERRUPTED,
        Event.reason == "retry",
        Event.created_at >= since,
        Event.turn_id.is_not(None),
    )
    if stream_id is not None:
        query = query.where(Event.stream_id == stream_id)
    async with engine.connect() as conn:
        rows = (await conn.execute(query.order_by(Event.id))).all()
    return [RetryMark(r[0], r[1], r[2], r[3], _message_ids(r[5], r[4])) for r in rows]


def _message_ids(payload: dict[str, Any] | None, fallback: int | None) -> tuple[int, ...]:
    ids = tuple(int(i) for i in (payload or {}).get("message_ids", []))
    return ids or ((fallback,) if fallback is not None else ())


async def retried_before(
    engine: AsyncEngine, message_ids: list[int], since: datetime, stream_id: int | None = None
) -> bool:
    """Whether an earlier interrupted turn already gave any of these messages back."""
    if not message_ids:
        return False
    wanted = set(message_ids)
    marks = await retry_marks(engine, since, stream_id)
    return any(wanted.intersection(mark.message_ids) for mark in marks)


async def owed_retries(
    engine: AsyncEngine, since: datetime, owners: Owners = EVERYONE
) -> list[OwedRetry]:
    """Retry marks since `since` still owed: a message of theirs that no later turn took
    (nor the mark's own give-back was lost: it still names the marked turn) and that no
    later drop or give-up ended. Only messages stored by `owners` count."""
    marks = await retry_marks(engine, since)
    if not marks:
        return []
    first = min(mark.event_id for mark in marks)
    ids = {mid for mark in marks for mid in mark.message_ids}
    streams = {mark.stream_id for mark in marks if mark.stream_id is not None}
    async with engine.connect() as conn:
        mine = select(Message.id, Message.turn_id, Message.stored_at).where(Message.id.in_(ids))
        owned = owners.clause()
        rows = await conn.execute(mine if owned is None else mine.where(owned))
        holders = {mid: (turn_id, stored_at) for mid, turn_id, stored_at in rows}
        taken = (
            await conn.execute(
                select(Event.id, Event.payload).where(
                    Event.kind == EventKind.TURN_STARTED,
                    Event.id > first,
                    Event.stream_id.in_(streams),
                )
            )
        ).all()
        ended = (
            await conn.execute(
                select(Event.id, Event.message_id).where(
                    _ends_a_waiting_message(), Event.id > first, Event.message_id.in_(ids)
                )
            )
        ).all()
    later: dict[int, int] = {}  # message id -> the newest event that took or ended it
    for event_id, payload in taken:
        for mid in _message_ids(payload, None):
            later[mid] = max(later.get(mid, 0), event_id)
    for event_id, mid in ended:
        later[mid] = max(later.get(mid, 0), event_id)
    owed = []
    for mark in marks:
        still = tuple(
            mid
            for mid in mark.message_ids
            if mid in holders
            and holders[mid][0] in (None, mark.turn_id)
            and later.get(mid, 0) < mark.event_id
        )
        if still:
            owed.append(OwedRetry(mark, still, max(holders[mid][1] for mid in still)))
    return owed


async def newest_stored_at(engine: AsyncEngine, message_ids: list[int]) -> datetime | None:
    if not message_ids:
        return None
    query = select(func.max(Message.stored_at)).where(Message.id.in_(message_ids))
    async with engine.connect() as conn:
        return (await conn.execute(query)).scalar()


async def ungated_messages(
    engine: AsyncEngine, since: datetime, owners: Owners = EVERYONE
) -> list[PendingRow]:
    """Messages from others stored since `since` by `owners` with no gate decision and no
    turn: the process stopped between the commit and the gate's event."""
    decided = select(Event.id).where(
        Event.message_id == Message.id, Event.kind.in_(MESSAGE_DECISIONS)
    )
    query = (
        select(Message, Stream, Identity.user_id, Identity.nickname)
        .join(Stream, Stream.id == Message.stream_id)
        .join(Identity, Identity.person_id == Message.sender_person_id)
        .where(
            Message.stored_at >= since,
            Message.from_bot.is_(False),
            Message.suppressed.is_(False),
            Message.turn_id.is_(None),
            ~decided.exists(),
            *((owned,) if (owned := owners.clause()) is not None else ()),
        )
        .order_by(Message.id)
    )
    async with AsyncSession(engine) as session:
        rows = (await session.execute(query)).all()
    return [_pending(msg, stream, user_id, nickname, {}) for msg, stream, user_id, nickname in rows]
