"""How much one QQ account sends across all its chats, pure: the send windows per account,
identical text to several groups held back, new groups warmed up slowly (docs/delivery.md,
"Account pacing").

Risk control judges an account, not a chat: many groups each paced politely still add up to
a flood from one account, and the same long text landing in several groups at once looks like
spam. Time is a monotonic reading passed in; the dispatcher asks `wait` before a send and
tells `sent` when it starts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from pallas.core.actions import Origin, OutboxKind
from pallas.core.inbound import StreamKind
from pallas.product.conversation.delivery.payload import payload_text
from pallas.store.outbox import OutboxRow

HOUR_MINUTES = 60


class AccountLimits(Protocol):
    """The knobs this reads (DeliveryPolicy has them)."""

    account_per_minute: int
    account_per_hour: int
    same_text_hold_s: float
    same_text_min_chars: int
    new_group_hours: float
    new_group_per_hour: int
    minute_s: float  # a minute of the windows; an hour is 60 of them (tests shorten it)


@dataclass(frozen=True)
class Outgoing:
    """What the account pace needs to know of a send about to go."""

    account: str  # the bot's own QQ id
    stream_id: int
    text_key: str = ""  # the text as compared across groups; "" when the rule does not apply
    new_group: bool = False  # a group the bot first saw less than `new_group_hours` ago


def text_key(text: str, limits: AccountLimits) -> str:
    """The text as the same-text rule compares it (spacing ignored); "" when too short to
    look like a broadcast: "哈哈" in two groups is two people laughing, not spam."""
    key = "".join(text.split())
    return key if len(key) >= limits.same_text_min_chars else ""


@dataclass
class AccountPace:
    limits: Callable[[], AccountLimits]
    sends: dict[str, deque[float]] = field(default_factory=dict)  # per account, the last hour
    group_sends: dict[int, deque[float]] = field(default_factory=dict)  # new groups only
    # Per account and text: when each chat last got it.
    texts: dict[tuple[str, str], dict[int, float]] = field(default_factory=dict)

    def wait(self, send: Outgoing, now: float) -> float:
        """Seconds until this send keeps within the account's limits (0: now)."""
        limits = self.limits()
        minute, hour = limits.minute_s, limits.minute_s * HOUR_MINUTES
        times = self.sends.get(send.account, deque())
        waits = [
            _window_wait(times, now, minute, limits.account_per_minute),
            _window_wait(times, now, hour, limits.account_per_hour),
            self._same_text_wait(send, now, limits.same_text_hold_s),
        ]
        if send.new_group:
            group = self.group_sends.get(send.stream_id, deque())
            waits.append(_window_wait(group, now, hour, limits.new_group_per_hour))
        return max(waits)

    def sent(self, send: Outgoing, now: float) -> None:
        hour = self.limits().minute_s * HOUR_MINUTES
        _record(self.sends.setdefault(send.account, deque()), now, hour)
        if send.new_group:
            _record(self.group_sends.setdefault(send.stream_id, deque()), now, hour)
        if send.text_key:
            self.texts.setdefault((send.account, send.text_key), {})[send.stream_id] = now
        self._forget_old_texts(now, hour)

    def _same_text_wait(self, send: Outgoing, now: float, hold_s: float) -> float:
        """Until the hold since the text last went to another chat has passed; the same chat
        saying it again is that chat's own pacing."""
        seen = self.texts.get((send.account, send.text_key), {}) if send.text_key else {}
        if send.stream_id in seen:
            return 0.0  # this chat has had it: saying it again is no broadcast
        return max(0.0, max(seen.values()) + hold_s - now) if seen else 0.0

    def _forget_old_texts(self, now: float, hour: float) -> None:
        if len(self.texts) < 1024:
            return
        self.texts = {
            key: seen for key, seen in self.texts.items() if max(seen.values()) > now - hour
        }


def _window_wait(times: deque[float], now: float, length: float, limit: int) -> float:
    """Seconds until fewer than `limit` of `times` (ascending) lie in the last `length`; a
    limit of 0 is no limit (an owner who turned the window off)."""
    if limit <= 0:
        return 0.0
    recent = [at for at in times if at > now - length]
    if len(recent) < limit:
        return 0.0
    return max(0.0, recent[len(recent) - limit] + length - now)


def _record(times: deque[float], now: float, keep_s: float) -> None:
    times.append(now)
    while times and times[0] <= now - keep_s:
        times.popleft()


# A command's answer was asked for in that chat just now: holding it back would make the
# command look broken. The account windows still count it.
SAME_TEXT_EXEMPT = frozenset({Origin.COMMAND})


def outgoing_of(row: OutboxRow, now: datetime, limits: AccountLimits) -> Outgoing:
    """What the account pace needs of an outbox row (pokes and reactions count as sends)."""
    group = row.stream.kind == StreamKind.GROUP
    key = ""
    if group and row.kind == OutboxKind.MESSAGE and row.origin not in SAME_TEXT_EXEMPT:
        key = text_key(payload_text(row.payload), limits)
    since = row.stream_since
    young = since is not None and now - since < timedelta(hours=limits.new_group_hours)
    return Outgoing(row.stream.self_id, row.stream_id, key, group and young)
