"""The gate run again over a recorded window, pure: what it would have decided for each
message under a policy given for each moment.

The gate's decisions are pure (gate.py), so with the facts recorded at each message, the
moment it was decided, the bot's own lines and the ambient turns that really started, the
replay under the settings then in force decides exactly what the gate decided. Under proposed
settings the bot's own lines stay as they were (what the model would have said instead is not
knowable), and each ambient pass the replay finds counts as an ambient turn at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime

from pallas.core.inbound import StreamKind
from pallas.product.conversation.gate.activity import Sighting, StreamActivity
from pallas.product.conversation.gate.facts import (
    Asker,
    MessageFacts,
    count_pokes,
    gate_request,
)
from pallas.product.conversation.gate.gate import (
    DIRECT_SIGNALS,
    Disposition,
    Outcome,
    Reason,
    decide_disposition,
)
from pallas.product.conversation.gate.policy import GatePolicy
from pallas.product.conversation.gate.trigger import lottery_roll

PolicyAt = Callable[[datetime], GatePolicy]


@dataclass(frozen=True)
class Recorded:
    """What the gate decided for a message, and what it decided on."""

    facts: MessageFacts
    outcome: str
    reason: str
    signals: frozenset[str]
    declined: bool  # the bot had just declined to follow up (the natural window is shut)
    in_window: bool  # inside the window asked about; before it, it only warms the view up

    @property
    def passed(self) -> bool:
        return self.outcome != Outcome.DROP.value

    @property
    def direct(self) -> bool:
        return self.outcome == Outcome.FORCE.value or bool(self.signals & DIRECT_SIGNALS)


@dataclass(frozen=True)
class Line:
    """One message of the chat, in the order stored."""

    message_id: int
    platform_message_id: str
    person_id: int
    at: datetime  # when the gate decided it; the bot's own: when it was stored
    from_bot: bool = False
    speaking: bool = True  # the bot's line counts as it talking (core.actions)
    recorded: Recorded | None = None  # None: the bot's own, or a line the gate never saw


@dataclass(frozen=True)
class RecordedChat:
    stream_id: int
    kind: StreamKind
    lines: tuple[Line, ...]
    ambient_turns: tuple[datetime, ...]  # ambient turns that really started


@dataclass(frozen=True)
class Replayed:
    message_id: int
    recorded: Recorded
    replayed: Disposition

    @property
    def agrees(self) -> bool:
        return (self.recorded.outcome, self.recorded.reason) == (
            self.replayed.outcome.value,
            self.replayed.reason.value,
        )


def replay(
    chat: RecordedChat, policy_at: PolicyAt, seed: str, *, recorded_ambient: bool
) -> list[Replayed]:
    """The gate's decision for each recorded message inside the window. `recorded_ambient`:
    the ambient turns that really started shape the view (the settings of the day); else each
    ambient pass of this replay starts one (proposed settings)."""
    activity = StreamActivity()
    turns = sorted(chat.ambient_turns) if recorded_ambient else []
    decided: list[Replayed] = []
    for line in chat.lines:
        while turns and turns[0] <= line.at:
            activity.add_ambient_turn(turns.pop(0))
        if line.from_bot:
            activity.add(_sighting(line, MessageFacts(), from_bot=True))
            continue
        if line.recorded is None:
            continue
        disposition = _decide(chat, line, line.recorded, activity, policy_at(line.at), seed)
        if not recorded_ambient and disposition.reason is Reason.AMBIENT:
            activity.add_ambient_turn(line.at)
        if line.recorded.in_window:
            decided.append(Replayed(line.message_id, line.recorded, disposition))
    return decided


def _decide(
    chat: RecordedChat,
    line: Line,
    recorded: Recorded,
    activity: StreamActivity,
    policy: GatePolicy,
    seed: str,
) -> Disposition:
    """As the gate stage does it (gate/admission.py): the view takes the message first."""
    activity.follow_up_declined = recorded.declined
    facts = recorded.facts
    activity.add(_sighting(line, facts))
    if facts.is_poke:
        facts = replace(facts, pokes_in_window=count_pokes(activity, line.at, policy))
    roll = lottery_roll(seed, chat.stream_id, line.message_id)
    asker = Asker(chat.kind, line.person_id, line.message_id, roll)
    return decide_disposition(gate_request(asker, facts, activity, policy, line.at), policy)


def _sighting(line: Line, facts: MessageFacts, from_bot: bool = False) -> Sighting:
    return Sighting(
        line.message_id,
        line.platform_message_id,
        line.person_id,
        line.at,
        from_bot=from_bot,
        mentioned_me=facts.mentioned_me,
        poked_me=facts.poked_me,
        replied_to_me=facts.replied_to_me,
        speaking=line.speaking,
    )


@dataclass(frozen=True)
class Tally:
    """How a window's messages were decided."""

    gated: int = 0
    called: int = 0  # passed because someone called the bot (@, name, reply, poke, private)
    own: int = 0  # passed on the bot's own judgement (attention, ambient)
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> int:
        return self.called + self.own


def tally(decisions: Iterable[tuple[bool, bool, str]]) -> Tally:
    """From (passed, direct, reason) of each message."""
    gated = called = own = 0
    dropped: dict[str, int] = {}
    for passed, direct, reason in decisions:
        gated += 1
        if not passed:
            dropped[reason] = dropped.get(reason, 0) + 1
        elif direct:
            called += 1
        else:
            own += 1
    return Tally(gated, called, own, dict(sorted(dropped.items())))


def recorded_tally(replayed: Iterable[Replayed]) -> Tally:
    return tally((r.recorded.passed, r.recorded.direct, r.recorded.reason) for r in replayed)


def replayed_tally(replayed: Iterable[Replayed]) -> Tally:
    return tally(
        (r.replayed.passes, r.replayed.is_direct_call, r.replayed.reason.value) for r in replayed
    )
