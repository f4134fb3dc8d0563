"""A chat's recorded window as the replay needs it, read from the store: its messages with
the gate's recorded decisions, the ambient turns that started, the model calls it cost, and
the gate settings in force at each moment (from the settings' change history)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import counts_as_speaking
from pallas.core.inbound import StreamKind
from pallas.product.conversation.gate.activity import HORIZON
from pallas.product.conversation.gate.facts import MessageFacts
from pallas.product.conversation.gate.policy import GatePolicy, effective_policy
from pallas.product.replay.gate_replay import Line, PolicyAt, Recorded, RecordedChat
from pallas.store import kernel_state
from pallas.store.audit import EventKind
from pallas.store.models import Event, LlmCall, Message, Stream, StreamAccount
from pallas.store.setting_history import SettingHistory, in_force_at

GATE_EVENTS = (EventKind.GATE_PASSED.value, EventKind.GATE_DROPPED.value)
LATE_EVENT = timedelta(minutes=5)  # a decision is recorded in batches, a little after it


@dataclass(frozen=True)
class ChatRef:
    stream_id: int
    kind: StreamKind
    external_id: str
    self_id: str
    name: str


@dataclass(frozen=True)
class RecordedCall:
    model: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost: float  # at the prices in force when it was made


async def find_group(engine: AsyncEngine, group: str, account: str | None) -> list[ChatRef]:
    """The bot's chat with this group (every account of the bot in it shares it: `account`
    only narrows to a group that account is in)."""
    query = select(Stream).where(
        Stream.kind == StreamKind.GROUP.value, Stream.external_id == group
    )
    if account:
        member = select(StreamAccount.stream_id).where(StreamAccount.self_id == account)
        query = query.where(or_(Stream.self_id == account, Stream.id.in_(member)))
    async with engine.connect() as conn:
        rows = (await conn.execute(query.order_by(Stream.id))).all()
    return [ChatRef(r.id, StreamKind(r.kind), r.external_id, r.self_id, r.name) for r in rows]


async def read_chat(
    engine: AsyncEngine, chat: ChatRef, since: datetime, until: datetime
) -> RecordedChat:
    """The window's messages and the hour before it (the gate's longest look back)."""
    warm = since - HORIZON
    messages = select(
        Message.id,
        Message.platform_message_id,
        Message.sender_person_id,
        Message.stored_at,
        Message.from_bot,
        Message.origin,
    ).where(
        Message.stream_id == chat.stream_id, Message.stored_at >= warm, Message.stored_at < until
    )
    events = select(Event.message_id, Event.payload).where(
        Event.stream_id == chat.stream_id,
        Event.kind.in_(GATE_EVENTS),
        Event.created_at >= warm,
        Event.created_at < until + LATE_EVENT,
        Event.message_id.is_not(None),
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(messages.order_by(Message.id))).all()
        # The ingress decision only: the batch gate, a full buffer or a restart may record
        # another gate event for the same message later.
        gated = {
            mid: payload
            for mid, payload in (await conn.execute(events)).all()
            if (payload or {}).get("stage", "ingress") == "ingress"
        }
    turns = await kernel_state.ambient_passes(engine, chat.stream_id, warm)
    lines = tuple(_line(row, gated.get(row.id), since) for row in rows)
    return RecordedChat(chat.stream_id, chat.kind, lines, tuple(t for t in turns if t < until))


def _line(row: Any, payload: dict[str, Any] | None, since: datetime) -> Line:
    if row.from_bot or payload is None:
        recorded = None
        at = row.stored_at
    else:
        at = datetime.fromisoformat(payload["at"]) if payload.get("at") else row.stored_at
        recorded = Recorded(
            facts=MessageFacts.from_json(payload.get("facts") or {}),
            outcome=str(payload.get("outcome", "")),
            reason=str(payload.get("reason", "")),
            signals=frozenset(payload.get("signals") or ()),
            declined=bool(payload.get("declined", False)),
            in_window=at >= since,
        )
    return Line(
        row.id,
        row.platform_message_id,
        row.sender_person_id,
        at,
        from_bot=row.from_bot,
        speaking=counts_as_speaking(row.origin),
        recorded=recorded,
    )


async def policies_of_the_day(
    engine: AsyncEngine, chat: ChatRef, defaults: GatePolicy, proposed: dict[str, Any]
) -> PolicyAt:
    """The chat's gate policy at each moment: the overrides then in force (its change
    history), with `proposed` over them."""
    changes = await SettingHistory(engine).changes("gate", str(chat.stream_id))
    current = dict(await kernel_state.policy_overrides(engine, chat.stream_id) or {})

    def policy_at(at: datetime) -> GatePolicy:
        overrides = in_force_at(changes, at, current) | proposed
        return effective_policy(defaults, overrides)[0]

    return policy_at


async def recorded_calls(
    engine: AsyncEngine, chat: ChatRef, since: datetime, until: datetime
) -> list[RecordedCall]:
    """The model calls made for this chat in the window (every purpose)."""
    query = select(
        LlmCall.model,
        LlmCall.prompt_tokens,
        LlmCall.completion_tokens,
        LlmCall.cached_tokens,
        LlmCall.cost,
    ).where(
        LlmCall.stream_id == chat.stream_id,
        LlmCall.created_at >= since,
        LlmCall.created_at < until,
    )
    async with engine.connect() as conn:
        return [RecordedCall(*row) for row in (await conn.execute(query)).all()]


async def turns_in(engine: AsyncEngine, chat: ChatRef, since: datetime, until: datetime) -> int:
    query = select(func.count()).where(
        Event.stream_id == chat.stream_id,
        Event.kind == EventKind.TURN_STARTED.value,
        Event.created_at >= since,
        Event.created_at < until,
    )
    async with engine.connect() as conn:
        return int((await conn.execute(query)).scalar() or 0)
