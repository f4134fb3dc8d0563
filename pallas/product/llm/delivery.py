"""Handing a decided reply to the chat: one interface, the quote rule decided by code.

`DirectDelivery` sends the bubbles in order through the platform outlet and reports what
went out. The outlet records each sent bubble in the timeline only after the platform's
receipt, so the bot's message becomes a fact only once it exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pallas.core.actions import Capability
from pallas.core.inbound import Segment, SegmentKind, StreamKey, StreamKind


class Outlet(Protocol):
    """What the agent may do on a chat platform (implemented by pallas/platform)."""

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None: ...

    async def poke(self, stream: StreamKey, user_id: str) -> bool: ...

    async def react(self, stream: StreamKey, platform_message_id: str, reaction: str) -> bool: ...

    async def capabilities(self, self_id: str) -> frozenset[Capability]: ...


@dataclass(frozen=True)
class OutgoingReply:
    turn_id: int
    stream_id: int
    stream: StreamKey
    bubbles: tuple[str, ...]
    quote: str | None  # platform id of the message to quote on the first bubble


@dataclass(frozen=True)
class DeliveryReport:
    sent: tuple[str, ...]  # platform ids of the bubbles that went out, in order
    failed: bool
    detail: str = ""


class ReplyDelivery(Protocol):
    async def deliver(self, reply: OutgoingReply) -> DeliveryReport: ...


def should_quote(kind: StreamKind, target_id: int | None, newest_id: int) -> bool:
    """Quote in a group only when newer messages landed after the target: otherwise the
    reply sits right under it and a quote adds nothing. Never in a private chat."""
    return kind is StreamKind.GROUP and target_id is not None and newest_id > target_id


class DirectDelivery:
    """Sends at once, in order; stops at the first bubble the platform refuses."""

    def __init__(self, outlet: Outlet) -> None:
        self._outlet = outlet

    async def deliver(self, reply: OutgoingReply) -> DeliveryReport:
        sent: list[str] = []
        for index, bubble in enumerate(reply.bubbles):
            quote = reply.quote if index == 0 else None
            segments = (Segment(SegmentKind.TEXT, text=bubble),)
            message_id = await self._outlet.send(reply.stream, segments, quote=quote)
            if message_id is None:
                detail = f"bubble {index + 1} of {len(reply.bubbles)} not sent"
                return DeliveryReport(tuple(sent), failed=True, detail=detail)
            sent.append(message_id)
        return DeliveryReport(tuple(sent), failed=False)
