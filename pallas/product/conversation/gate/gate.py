"""The ingress gate: a pure, ordered decision on whether a message deserves a turn.

No model, no I/O, no clock: the caller gathers facts from the store and passes them in.
The order of the rules is the specification (docs/gating.md explains each):

1. the bot's own message                       -> drop  self_message
   model chat switched off for this chat        -> drop  chat_off
   muted by an admin (安静 N 分钟), until then   -> drop  muted
2. a poke beyond the poke budget of the window  -> drop  poke_flood
3. a private conversation                       -> force direct_conversation
4. a real @ in a group that must answer @       -> force mentioned
5. quiet hours                                  -> drop  asleep
6. signals are collected; the frequency cap only applies when none of them is a direct
   call (@, name, poke, reply to the bot)      -> drop  frequency_cap
7. any attention signal                         -> deliberate
   the ambient lottery                          -> deliberate ambient
   nothing                                      -> drop  attention_filtered
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from pallas.core.inbound import StreamKind
from pallas.product.conversation.gate.policy import GatePolicy


class Outcome(StrEnum):
    DROP = "drop"
    FORCE = "force"
    DELIBERATE = "deliberate"


class Reason(StrEnum):
    SELF_MESSAGE = "self_message"
    CHAT_OFF = "chat_off"
    MUTED = "muted"
    POKE_FLOOD = "poke_flood"
    DIRECT_CONVERSATION = "direct_conversation"
    MENTIONED = "mentioned"
    ASLEEP = "asleep"
    FREQUENCY_CAP = "frequency_cap"
    ATTENTION = "attention"
    AMBIENT = "ambient"
    ATTENTION_FILTERED = "attention_filtered"
    # Not a rule of the gate: a turn the bot started itself (turns/proactive.py).
    PROACTIVE = "proactive"


class Signal(StrEnum):
    MENTIONED = "mentioned"  # a real @ of the bot
    CALLED_BY_NAME = "called_by_name"
    REPLIED_TO_ME = "replied_to_me"
    POKED_ME = "poked_me"
    ONGOING_EXCHANGE = "ongoing_exchange"
    NATURAL_WINDOW = "natural_window"  # shortly after the bot spoke
    FOLLOW_UP = "follow_up"  # the same person continuing shortly after an @
    PUBLIC_QUESTION = "public_question"
    HOT_CONVERSATION = "hot_conversation"


# Someone called the bot directly: the frequency cap never silences these.
DIRECT_SIGNALS = frozenset(
    {Signal.MENTIONED, Signal.CALLED_BY_NAME, Signal.REPLIED_TO_ME, Signal.POKED_ME}
)


@dataclass(frozen=True)
class AmbientChance:
    """The facts the ambient lottery needs; `roll` is a number in [0, 1) drawn by the caller."""

    roll: float = 1.0
    seconds_since_last: float | None = None
    in_last_hour: int = 0


@dataclass(frozen=True)
class GateRequest:
    kind: StreamKind
    is_self_message: bool = False
    is_poke: bool = False
    mentioned_me: bool = False
    called_by_name: bool = False
    replied_to_me: bool = False
    poked_me: bool = False
    pokes_in_window: int = 0
    asleep: bool = False
    muted: bool = False  # an admin muted the chat for a while (even an @ waits)
    replies_in_window: int = 0
    seconds_since_bot_spoke: float | None = None
    follow_up_declined: bool = False
    ongoing_exchange: bool = False
    in_follow_up_window: bool = False
    public_question: bool = False
    hot_conversation: bool = False
    ambient: AmbientChance = field(default_factory=AmbientChance)


@dataclass(frozen=True)
class Disposition:
    outcome: Outcome
    reason: Reason
    signals: frozenset[Signal] = frozenset()

    @property
    def passes(self) -> bool:
        return self.outcome is not Outcome.DROP

    @property
    def is_direct_call(self) -> bool:
        """Someone called the bot (@, name, reply, poke, a private message)."""
        return self.outcome is Outcome.FORCE or bool(self.signals & DIRECT_SIGNALS)


def decide_disposition(req: GateRequest, policy: GatePolicy) -> Disposition:
    if req.is_self_message:
        return Disposition(Outcome.DROP, Reason.SELF_MESSAGE)
    if not policy.model_chat:
        return Disposition(Outcome.DROP, Reason.CHAT_OFF)
    if req.muted:
        return Disposition(Outcome.DROP, Reason.MUTED)
    if req.poked_me and req.pokes_in_window > policy.poke_limit:
        # Before the signals: a poke storm always lands inside the natural window.
        return Disposition(Outcome.DROP, Reason.POKE_FLOOD)
    signals = collect_signals(req, policy)
    if req.kind is StreamKind.PRIVATE:
        return Disposition(Outcome.FORCE, Reason.DIRECT_CONVERSATION, signals)
    if req.mentioned_me and policy.must_reply_on_mention:
        return Disposition(Outcome.FORCE, Reason.MENTIONED, signals)
    if req.asleep:
        return Disposition(Outcome.DROP, Reason.ASLEEP, signals)
    if not signals & DIRECT_SIGNALS and req.replies_in_window >= policy.max_replies_in_window:
        return Disposition(Outcome.DROP, Reason.FREQUENCY_CAP, signals)
    if signals:
        return Disposition(Outcome.DELIBERATE, Reason.ATTENTION, signals)
    if not req.is_poke and ambient_lottery_wins(req.ambient, policy):
        return Disposition(Outcome.DELIBERATE, Reason.AMBIENT, signals)
    return Disposition(Outcome.DROP, Reason.ATTENTION_FILTERED, signals)


def collect_signals(req: GateRequest, policy: GatePolicy) -> frozenset[Signal]:
    if req.is_poke and not req.poked_me:
        return frozenset()  # members poking each other is not talk the bot joins
    found = {
        Signal.MENTIONED: req.mentioned_me,
        Signal.CALLED_BY_NAME: req.called_by_name and not req.is_poke,
        Signal.REPLIED_TO_ME: req.replied_to_me,
        Signal.POKED_ME: req.poked_me,
        Signal.ONGOING_EXCHANGE: req.ongoing_exchange,
        Signal.NATURAL_WINDOW: in_natural_window(req, policy),
        Signal.FOLLOW_UP: req.in_follow_up_window,
        Signal.PUBLIC_QUESTION: req.public_question and policy.answer_public_questions,
        Signal.HOT_CONVERSATION: req.hot_conversation and policy.join_hot_conversations,
    }
    return frozenset(signal for signal, present in found.items() if present)


def in_natural_window(req: GateRequest, policy: GatePolicy) -> bool:
    """Shortly after the bot spoke, unless it deliberately stayed silent since."""
    if req.follow_up_declined or req.seconds_since_bot_spoke is None:
        return False
    return req.seconds_since_bot_spoke <= policy.natural_window_s


def ambient_lottery_wins(chance: AmbientChance, policy: GatePolicy) -> bool:
    if policy.ambient_probability <= 0 or chance.in_last_hour >= policy.ambient_hourly_budget:
        return False
    last = chance.seconds_since_last
    if last is not None and last < policy.ambient_cooldown_s:
        return False
    return chance.roll < policy.ambient_probability
