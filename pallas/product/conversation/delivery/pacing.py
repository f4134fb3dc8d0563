"""Delivery decisions, pure: pauses between bubbles, the send-rate gate, retries, recovery.

Time is always passed in. The pause between bubbles is computed here, once, from a typing
speed, not by each platform adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from pallas.product.conversation.delivery.account_pace import AccountPace, Outgoing


@dataclass(frozen=True)
class DeliveryPolicy:
    chars_per_second: float = 8.0  # typing speed: the pause before a bubble is its typing time
    min_pause_s: float = 0.8
    max_pause_s: float = 4.0
    stream_interval_s: float = 1.0  # at least this between two sends to one conversation
    global_per_second: float = 2.0  # all conversations together, a token bucket ...
    global_burst: int = 5  # ... holding this many tokens
    send_timeout_s: float = 10.0  # one platform call; longer holds every conversation up
    parallel_sends: int = 32  # heads of different conversations handed over together, at most
    max_attempts: int = 5
    backoff_base_s: float = 2.0
    backoff_max_s: float = 60.0
    stale_after_s: float = 600.0  # a reply not sent by then would be out of context
    resend_window_s: float = 30.0  # an interrupted send younger than this is sent again
    # Unsolicited replies one chat may have waiting (the newest included); older ones drop.
    max_waiting_unsolicited: int = 2
    # One account across all its chats (account_pace.py); 0 turns a window off.
    account_per_minute: int = 20
    account_per_hour: int = 300
    same_text_hold_s: float = 120.0  # the same text to another group waits this long
    same_text_min_chars: int = 8  # shorter texts ("哈哈") are not compared
    new_group_hours: float = 24.0  # a group first seen this recently is warmed up ...
    new_group_per_hour: int = 20  # ... with at most this many sends an hour
    minute_s: float = 60.0  # the windows' minute; an hour is 60 of them (tests shorten it)


def bubble_pauses(bubbles: Sequence[str], policy: DeliveryPolicy) -> list[float]:
    """The pause before each bubble. The first is 0: generating it already took time."""
    pauses = [0.0]
    for bubble in bubbles[1:]:
        typing = len(bubble) / policy.chars_per_second
        pauses.append(min(policy.max_pause_s, max(policy.min_pause_s, typing)))
    return pauses[: len(bubbles)]


def retry_delay(attempts: int, policy: DeliveryPolicy) -> float:
    """Exponential backoff after the `attempts`-th failure."""
    return min(policy.backoff_max_s, policy.backoff_base_s * 2 ** max(0, attempts - 1))


# Pacing as it is now: fixed, or a reader the dispatcher asks at every send (the console
# changes it while the bot runs: settings/delivery_section.py).
PolicyReader = Callable[[], DeliveryPolicy]


def reader_of(policy: DeliveryPolicy | PolicyReader) -> PolicyReader:
    if isinstance(policy, DeliveryPolicy):
        return lambda: policy
    return policy


@dataclass
class RateGate:
    """Per-conversation spacing, a global token bucket so a backlog drains slowly, and each
    account's own limits across its chats (`AccountPace`)."""

    pacing: PolicyReader
    last_sent: dict[int, float] = field(default_factory=dict)
    tokens: float = -1.0  # -1: not started (full bucket)
    refilled_at: float = 0.0
    accounts: AccountPace = field(init=False)

    def __post_init__(self) -> None:
        self.accounts = AccountPace(self.pacing)

    def wait(
        self, stream_id: int, pause_s: float, now: float, send: Outgoing | None = None
    ) -> float:
        """Seconds until a send to this conversation may go (0: now)."""
        self._refill(now)
        policy = self.pacing()
        spacing = max(pause_s, policy.stream_interval_s)
        last = self.last_sent.get(stream_id)
        stream_wait = 0.0 if last is None else max(0.0, last + spacing - now)
        global_wait = 0.0 if self.tokens >= 1 else (1 - self.tokens) / policy.global_per_second
        account_wait = 0.0 if send is None else self.accounts.wait(send, now)
        return max(stream_wait, global_wait, account_wait)

    def sent(self, stream_id: int, now: float, send: Outgoing | None = None) -> None:
        """A send to this conversation starts now: it takes a token and restarts the spacing."""
        self._refill(now)
        self.tokens -= 1
        self.last_sent[stream_id] = now
        if send is not None:
            self.accounts.sent(send, now)

    def confirmed(self, stream_id: int, now: float) -> None:
        """The platform confirmed the send: the spacing counts from here, as the chat saw it."""
        self.last_sent[stream_id] = max(now, self.last_sent.get(stream_id, now))

    def _refill(self, now: float) -> None:
        policy = self.pacing()
        if self.tokens < 0:
            self.tokens, self.refilled_at = float(policy.global_burst), now
            return
        gained = (now - self.refilled_at) * policy.global_per_second
        self.tokens = min(float(policy.global_burst), self.tokens + gained)
        self.refilled_at = now


class Recovery(StrEnum):
    CONFIRMED = "confirmed"  # the platform's echo of it is in the timeline: it was sent
    RESEND = "resend"  # young enough that sending again is better than losing it
    UNKNOWN = "unknown"  # too old to resend blindly: recorded, not sent


def recover_interrupted(
    created_at: datetime,
    now: datetime,
    policy: DeliveryPolicy,
    *,
    echoed: bool,
    in_history: bool | None = None,
) -> Recovery:
    """What to do with a row that was being sent when the process (or its receipt) was lost.

    `echoed`: the platform's report of the message is in the timeline. `in_history`: what the
    platform's message history says once it can be asked (None: it could not be read).
    """
    if echoed or in_history:
        return Recovery.CONFIRMED
    if in_history is False and not is_stale(created_at, now, policy):
        return Recovery.RESEND  # the platform says it never went out: sending is safe
    if in_history is None and (now - created_at).total_seconds() <= policy.resend_window_s:
        return Recovery.RESEND  # unknowable: young enough that a duplicate beats a loss
    return Recovery.UNKNOWN


def is_stale(created_at: datetime, now: datetime, policy: DeliveryPolicy) -> bool:
    return (now - created_at).total_seconds() > policy.stale_after_s
