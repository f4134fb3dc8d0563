"""Facts for the gate: per message (fixed at arrival) and per stream (read at decision time).

All pure: the stream's recent activity and the time are passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from pallas.core.inbound import InboundMessage, StreamKind
from pallas.product.conversation.gate.activity import StreamActivity, age_s, epoch_us
from pallas.product.conversation.gate.gate import AmbientChance, GateRequest
from pallas.product.conversation.gate.policy import GatePolicy, is_muted, is_quiet_time
from pallas.product.conversation.gate.signals import (
    looks_like_public_question,
    names_in,
    opens_with_name,
)


@dataclass(frozen=True)
class MessageFacts:
    """What one message says about attention. Counted once, at arrival, never recomputed."""

    is_poke: bool = False
    mentioned_me: bool = False
    called_by_name: bool = False
    opens_with_name: bool = False
    replied_to_me: bool = False
    poked_me: bool = False
    public_question: bool = False
    pokes_in_window: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MessageFacts:
        return cls(**{key: data[key] for key in cls.__dataclass_fields__ if key in data})


def read_message(msg: InboundMessage, names: Sequence[str], replied_to_bot: bool) -> MessageFacts:
    """The attention facts of one message. A poke's synthetic text never names the bot."""
    self_id = msg.stream.self_id
    others = any(user != self_id for user in msg.mentions)
    text = "" if msg.is_poke else msg.text
    return MessageFacts(
        is_poke=msg.is_poke,
        mentioned_me=msg.mentions_me and not msg.is_poke,
        called_by_name=names_in(text, names),
        opens_with_name=opens_with_name(text, names),
        replied_to_me=replied_to_bot,
        poked_me=msg.is_poke and msg.mentions_me,
        public_question=bool(text) and looks_like_public_question(text, others),
    )


def count_pokes(activity: StreamActivity, now: datetime, policy: GatePolicy) -> int:
    """Pokes at the bot in the window, this one included (the activity already holds it)."""
    count, now_us = 0, epoch_us(now)
    for s in reversed(activity.sightings):  # in arrival order: stop at the window's edge
        if age_s(now_us, s) > policy.poke_window_s:
            break
        count += s.poked_me
    return count


def merge_facts(facts: Iterable[MessageFacts]) -> MessageFacts:
    """A batch's facts: attention OR-ed, poke count the maximum (never re-counted)."""
    items = list(facts)
    return MessageFacts(
        is_poke=all(f.is_poke for f in items),
        mentioned_me=any(f.mentioned_me for f in items),
        called_by_name=any(f.called_by_name for f in items),
        opens_with_name=any(f.opens_with_name for f in items),
        replied_to_me=any(f.replied_to_me for f in items),
        poked_me=any(f.poked_me for f in items),
        public_question=any(f.public_question for f in items),
        pokes_in_window=max((f.pokes_in_window for f in items), default=0),
    )


@dataclass(frozen=True)
class Asker:
    """Who is talking and which message the decision is about."""

    kind: StreamKind
    person_id: int
    message_id: int
    ambient_roll: float


def gate_request(
    asker: Asker,
    facts: MessageFacts,
    activity: StreamActivity,
    policy: GatePolicy,
    now: datetime,
    queued_replies: int = 0,
) -> GateRequest:
    """The gate's input. `queued_replies`: the chat's bubbles queued but not yet sent; the
    frequency cap counts them with the ones delivered in its window."""
    view = _scan(activity, asker, now, policy)
    return GateRequest(
        kind=asker.kind,
        is_poke=facts.is_poke,
        mentioned_me=facts.mentioned_me,
        called_by_name=facts.called_by_name,
        replied_to_me=facts.replied_to_me,
        poked_me=facts.poked_me,
        pokes_in_window=facts.pokes_in_window,
        asleep=is_quiet_time(now, policy),
        muted=is_muted(now, policy),
        replies_in_window=view.bot_replies + queued_replies,
        seconds_since_bot_spoke=view.since_bot_spoke,
        follow_up_declined=activity.follow_up_declined,
        # This person addressed the bot recently and the bot answered after that.
        ongoing_exchange=view.asked_id is not None and view.last_bot_id > view.asked_id,
        in_follow_up_window=not facts.mentioned_me and view.mentioned_recently,
        public_question=facts.public_question,
        hot_conversation=(
            view.hot_messages >= policy.hot_min_messages
            and len(view.hot_speakers) >= policy.hot_min_speakers
        ),
        ambient=_ambient(activity, now, asker.ambient_roll),
    )


@dataclass
class _View:
    bot_replies: int = 0
    since_bot_spoke: float | None = None
    last_bot_id: int = 0
    asked_id: int | None = None  # this person's newest direct call inside the exchange window
    mentioned_recently: bool = False
    hot_messages: int = 0
    hot_speakers: set[int] = field(default_factory=set)


def _scan(activity: StreamActivity, asker: Asker, now: datetime, policy: GatePolicy) -> _View:
    """One pass, newest first, stopping at the longest window any fact looks back over.

    The bot's last line older than every window (the natural window included) decides
    nothing: the scan never walks the rest of the hour to find it.
    """
    view = _View()
    horizon = max(
        policy.reply_window_s,
        policy.ongoing_exchange_s,
        policy.follow_up_window_s,
        policy.hot_window_s,
        policy.natural_window_s,
    )
    now_us = epoch_us(now)
    for s in reversed(activity.sightings):
        age = age_s(now_us, s)
        if age > horizon:
            break
        if s.from_bot:
            if s.speaking:  # a command's answer or a welcome is not the bot talking
                if view.since_bot_spoke is None:
                    view.since_bot_spoke, view.last_bot_id = age, s.message_id
                view.bot_replies += age <= policy.reply_window_s
            continue
        if age <= policy.hot_window_s:
            view.hot_messages += 1
            view.hot_speakers.add(s.person_id)
        if s.person_id != asker.person_id or s.message_id == asker.message_id:
            continue
        if view.asked_id is None and s.direct and age <= policy.ongoing_exchange_s:
            view.asked_id = s.message_id
        view.mentioned_recently |= s.mentioned_me and age <= policy.follow_up_window_s
    return view


def _ambient(activity: StreamActivity, now: datetime, roll: float) -> AmbientChance:
    turns = [t for t in activity.ambient_turns if (now - t).total_seconds() <= 3600]
    last = (now - turns[-1]).total_seconds() if turns else None
    return AmbientChance(roll=roll, seconds_since_last=last, in_last_hour=len(turns))
