"""Handing decided actions to the chat: the interfaces, and the quote rule decided by code.

The implementation is the durable outbox (`outbox.py`): a reply is committed with one row per
bubble and sent by the dispatcher. The outlet records each sent bubble in the timeline only
after the platform's receipt, so the bot's message becomes a fact only once it exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from pallas.core.actions import Capability, ChatAction, Origin, SentLookup
from pallas.core.inbound import Segment, StreamKey, StreamKind


class Outlet(Protocol):
    """What the agent may do on a chat platform (implemented by pallas/platform)."""

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None: ...

    async def poke(self, stream: StreamKey, user_id: str) -> bool: ...

    async def react(self, stream: StreamKey, platform_message_id: str, reaction: str) -> bool: ...

    async def capabilities(self, self_id: str) -> frozenset[Capability]: ...

    async def is_connected(self, self_id: str) -> bool: ...

    async def find_sent(self, stream: StreamKey, text: str, since: datetime) -> SentLookup:
        """The bot's message with this text sent since `since`, per the platform's history."""
        ...


@dataclass(frozen=True)
class OutgoingMedia:
    """A picture or a voice a reply sends as a message of its own, after its text bubbles."""

    segment: Segment
    # Kept on the outbox row for whoever listens to receipts (a sticker's hash, counted once
    # the platform confirmed the send).
    marks: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class OutgoingReply:
    turn_id: int
    stream_id: int
    stream: StreamKey
    bubbles: tuple[str, ...]
    quote: str | None  # platform id of the message to quote on the first message
    direct: bool = False  # answers a direct call (@, reply, poke, private): never dropped
    media: tuple[OutgoingMedia, ...] = ()  # sent after the bubbles, one message each
    origin: Origin = Origin.AGENT_REPLY  # or PROACTIVE: a turn the bot started itself

    @property
    def texts(self) -> tuple[str, ...]:
        """What each message of the reply reads as, in sending order."""
        return (*self.bubbles, *(m.segment.text for m in self.media))


@dataclass(frozen=True)
class OutgoingMessage:
    """One message any part of the bot sends (a repeat, a welcome, a command's answer...)."""

    turn_id: int  # the turn or responder action it belongs to (trace() finds it by this)
    stream_id: int
    segments: tuple[Segment, ...]
    key: str | None = None  # idempotency: queued at most once under this key
    direct: bool = True  # never dropped for a crowded queue
    origin: Origin = field(kw_only=True)  # every sender says which part of the bot it is
    # The account it goes through: the one that answered the message it acts on (several
    # accounts in a group, docs/accounts.md); None: the one that answered the chat last.
    account: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class DeliveryReport:
    queued: tuple[int, ...]  # the outbox rows committed for it, in sending order
    failed: bool
    detail: str = ""


class Actions(Protocol):
    async def act(
        self,
        turn_id: int,
        stream_id: int,
        action: ChatAction,
        *,
        origin: Origin,
        key: str | None = None,
        account: str | None = None,
    ) -> tuple[int, ...]:
        """A poke or a reaction: one outbox row; raises PayloadError for a bad one. `account`
        as on OutgoingMessage."""


class ReplyDelivery(Actions, Protocol):
    """The agent's way out: a reply's bubbles, and its pokes and reactions."""

    async def deliver(self, reply: OutgoingReply) -> DeliveryReport: ...


class Sender(Actions, Protocol):
    """The one way out for everything besides the agent's replies (responders, commands,
    later stickers and proactive lines): typed, validated when queued, durable."""

    async def send(self, message: OutgoingMessage) -> tuple[int, ...]:
        """The outbox rows for it; raises PayloadError for a message that cannot be sent."""


def should_quote(kind: StreamKind, target_id: int | None, newest_id: int) -> bool:
    """Quote in a group only when newer messages landed after the target: otherwise the
    reply sits right under it and a quote adds nothing. Never in a private chat."""
    return kind is StreamKind.GROUP and target_id is not None and newest_id > target_id
