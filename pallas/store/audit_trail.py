"""The audit trail read back: why a message got the answer it got (or none).

`explain(message_id)` gives a message's whole path: its own events (stored, stage decisions,
the gate's rule and reason), then the turn that took it, if any, with that turn's events
(batch gate, context, tool calls, the agent's decision, what was queued, how the turn ended)
and its outbox rows with their delivery state. `trace(turn_id)` gives one turn's part alone.
This is what "why didn't it reply?" shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.audit import EventKind
from pallas.store.models import Event, Message, OutboxItem

_STAGE_KINDS = (EventKind.STAGE_ACTED.value, EventKind.STAGE_HANDLED.value)


@dataclass(frozen=True)
class TrailEvent:
    kind: str
    reason: str
    created_at: datetime
    turn_id: int | None
    message_id: int | None
    payload: dict[str, Any]


@dataclass(frozen=True)
class OutboxState:
    id: int
    kind: str
    status: str
    attempts: int
    platform_message_id: str | None
    last_error: str
    origin: str  # the part of the bot it came from (core.actions.Origin)


@dataclass(frozen=True)
class TurnTrace:
    turn_id: int
    events: tuple[TrailEvent, ...]
    outbox: tuple[OutboxState, ...]

    def kinds(self) -> list[str]:
        return [event.kind for event in self.events]


@dataclass(frozen=True)
class MessagePath:
    message_id: int
    text: str
    suppressed: bool
    events: tuple[TrailEvent, ...]  # the message's own: inbound, stages, the ingress gate
    turn: TurnTrace | None  # the turn that took it, if one did
    # What responder stages did for it (a repeat, a poke back), each under its action id.
    actions: tuple[TurnTrace, ...] = ()

    def kinds(self) -> list[str]:
        kinds = [event.kind for event in self.events]
        for action in self.actions:
            kinds += [k for k in action.kinds() if not k.startswith("stage_")]
        return kinds + (self.turn.kinds() if self.turn else [])


async def explain(engine: AsyncEngine, message_id: int) -> MessagePath | None:
    """The message's path, or None if no such message is stored."""
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(Message.text, Message.suppressed, Message.turn_id).where(
                    Message.id == message_id
                )
            )
        ).first()
        if row is None:
            return None
        # A stage's decision carries the id of the action it took; a turn's events are
        # shown under the turn below.
        mine = or_(Event.turn_id.is_(None), Event.kind.in_(_STAGE_KINDS))
        own = await conn.execute(_events().where(Event.message_id == message_id, mine))
        events = tuple(_trail_event(e) for e in own.all())
    turn = await trace(engine, row.turn_id) if row.turn_id is not None else None
    action_ids = dict.fromkeys(e.turn_id for e in events if e.turn_id is not None)
    actions = tuple([await trace(engine, action) for action in action_ids])
    return MessagePath(message_id, row.text, bool(row.suppressed), events, turn, actions)


async def message_id_for(
    engine: AsyncEngine, stream_id: int, platform_message_id: str
) -> int | None:
    """The stored id of a chat's message, by the platform's id (what a quote names)."""
    query = select(Message.id).where(
        Message.stream_id == stream_id, Message.platform_message_id == platform_message_id
    )
    async with engine.connect() as conn:
        return (await conn.execute(query.limit(1))).scalar()


async def trace(engine: AsyncEngine, turn_id: int) -> TurnTrace:
    """One turn's events and outbox rows, in the order they happened."""
    outbox_query = (
        select(
            OutboxItem.id,
            OutboxItem.kind,
            OutboxItem.status,
            OutboxItem.attempts,
            OutboxItem.platform_message_id,
            OutboxItem.last_error,
            OutboxItem.origin,
        )
        .where(OutboxItem.turn_id == turn_id)
        .order_by(OutboxItem.id)
    )
    async with engine.connect() as conn:
        events = (await conn.execute(_events().where(Event.turn_id == turn_id))).all()
        rows = (await conn.execute(outbox_query)).all()
    return TurnTrace(
        turn_id,
        tuple(_trail_event(e) for e in events),
        tuple(OutboxState(*row) for row in rows),
    )


def _events() -> Any:
    return select(
        Event.kind,
        Event.reason,
        Event.created_at,
        Event.turn_id,
        Event.message_id,
        Event.payload,
    ).order_by(Event.id)


def _trail_event(row: Any) -> TrailEvent:
    return TrailEvent(
        row.kind, row.reason, row.created_at, row.turn_id, row.message_id, dict(row.payload)
    )


async def last_said_before(
    engine: AsyncEngine, stream_id: int, person_id: int, before_id: int
) -> int | None:
    """The id of a person's newest message in a chat before `before_id`."""
    query = (
        select(Message.id)
        .where(
            Message.stream_id == stream_id,
            Message.sender_person_id == person_id,
            Message.id < before_id,
        )
        .order_by(Message.id.desc())
        .limit(1)
    )
    async with engine.connect() as conn:
        return (await conn.execute(query)).scalar()


async def recent_decisions(engine: AsyncEngine, stream_id: int, limit: int) -> list[TrailEvent]:
    """The chat's newest gate decisions and turn endings, newest first."""
    kinds = ("gate_dropped", "turn_finished", "stage_handled", "stage_suppressed")
    query = (
        _events()
        .where(Event.stream_id == stream_id, Event.kind.in_(kinds))
        .order_by(None)
        .order_by(Event.id.desc())
        .limit(limit)
    )
    async with engine.connect() as conn:
        return [_trail_event(row) for row in (await conn.execute(query)).all()]
