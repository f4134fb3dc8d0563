"""Unified ingress: persist every inbound fact first, then hand new messages onward.

Order matters and is the point of this module: identity resolution and the durable write
happen before any decision; a duplicate delivery stops here; the next stage only ever sees
messages that are already committed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

from loguru import logger

from pallas.core.actions import Origin
from pallas.core.inbound import InboundEvent, InboundMessage, MemberChange, StreamKey, StreamKind
from pallas.core.text import describe_inbound
from pallas.product.conversation.accounts.book import AccountBook
from pallas.store.timeline import MessageWritten, NoticeWritten, TimelineWriter


@dataclass(frozen=True)
class StoredMessage:
    """An inbound message together with the keys the store gave it."""

    message_id: int
    stream_id: int
    sender_person_id: int
    message: InboundMessage


class Verdict(StrEnum):
    """What the stages after ingress did with a message (see stages.py)."""

    CONTINUE = "continue"
    HANDLED = "handled"
    SUPPRESSED = "suppressed"


@dataclass(frozen=True)
class StageResult:
    verdict: Verdict
    reason: str = ""  # a stable snake_case word for the audit (docs/architecture.md)
    # The responder action this stage took (its outbox rows carry it): the audit names it.
    turn_id: int | None = None


CONTINUE = StageResult(Verdict.CONTINUE)


@dataclass(frozen=True)
class StoredChange:
    """A member joining or leaving, as recorded (the welcome and farewell act on it)."""

    stream_id: int
    person_id: int | None
    change: MemberChange


class NextStage(Protocol):
    """What ingress hands committed, new messages to (the stage list)."""

    async def on_message(self, stored: StoredMessage) -> StageResult:
        """A new message from someone else."""

    async def on_own_message(self, stored: StoredMessage) -> None:
        """A new message the bot sent (reported by the platform)."""

    async def on_member_change(self, stored: StoredChange) -> None:
        """A member joined or left (recorded)."""


class NoNextStage:
    """Used while nothing is plugged in after ingress: messages are recorded, nothing more."""

    async def on_message(self, stored: StoredMessage) -> StageResult:
        return CONTINUE

    async def on_own_message(self, stored: StoredMessage) -> None:
        return None

    async def on_member_change(self, stored: StoredChange) -> None:
        return None


class IngressOutcome(StrEnum):
    ACCEPTED = "accepted"  # new inbound message, handed to the next stage
    RECORDED = "recorded"  # a notice, or the bot's own message: recorded, nothing to decide
    DUPLICATE = "duplicate"  # seen before: stop here
    SUPPRESSED = "suppressed"  # recorded and flagged as silenced: nobody else may see it
    FAILED = "failed"  # could not be persisted: stop here


@dataclass(frozen=True)
class IngressResult:
    outcome: IngressOutcome
    stored: StoredMessage | None = None

    @property
    def should_continue(self) -> bool:
        """Whether other handlers may act on this event."""
        return self.outcome in (IngressOutcome.ACCEPTED, IngressOutcome.RECORDED)


# Which part of the bot the chat's message in flight comes from (the dispatcher's InFlight).
OriginOf = Callable[[StreamKey], Origin | None]


def _no_origin(stream: StreamKey) -> Origin | None:
    return None


def _speaking(msg: InboundMessage) -> InboundMessage:
    """The bot's own message as the account that sent it tells it (another of the bot's
    accounts may have delivered it: docs/accounts.md)."""
    sender = msg.sender.user_id
    if msg.stream.self_id == sender or msg.stream.kind is not StreamKind.GROUP:
        return msg
    return replace(msg, stream=replace(msg.stream, self_id=sender))


class Ingress:
    def __init__(self, writer: TimelineWriter, next_stage: NextStage | None = None) -> None:
        self._writer = writer
        self._next_stage: NextStage = next_stage or NoNextStage()
        self._origin_of: OriginOf = _no_origin
        self._accounts: AccountBook | None = None

    def plug(self, next_stage: NextStage) -> None:
        """Attach the stage that receives accepted messages."""
        self._next_stage = next_stage

    def plug_origins(self, origin_of: OriginOf) -> None:
        """Where the bot's own messages learn which part of the bot sent them: the send's
        record and the platform's echo alike, whichever is stored first."""
        self._origin_of = origin_of

    def plug_accounts(self, accounts: AccountBook) -> None:
        """Several accounts: a group's message goes on once, told to the account that
        answers it; another account's message is the bot's own (docs/accounts.md)."""
        self._accounts = accounts

    async def accept(self, item: InboundEvent) -> IngressResult:
        if isinstance(item, InboundMessage) and self._accounts is not None:
            item = self._accounts.as_own(item)
        if isinstance(item, InboundMessage) and item.from_bot and item.origin is None:
            item = replace(item, origin=self._origin_of(_speaking(item).stream))
        try:
            written = await self._writer.write(item)
        except Exception as exc:
            logger.error("inbound not persisted ({!r}): {}", exc, describe_inbound(item))
            return IngressResult(IngressOutcome.FAILED)
        if self._accounts is not None and item.stream.kind is StreamKind.GROUP:
            await self._accounts.delivered(written.stream_id, item)
        if isinstance(item, MemberChange) and isinstance(written, NoticeWritten):
            await self._member_changed(item, written)
        if not isinstance(item, InboundMessage) or not isinstance(written, MessageWritten):
            return IngressResult(IngressOutcome.RECORDED)
        if written.duplicate:
            log = logger.debug if written.copy else logger.info
            log("duplicate delivery ignored: {}", describe_inbound(item))
            return IngressResult(IngressOutcome.DUPLICATE)
        if self._accounts is not None and not item.from_bot:
            item = await self._accounts.answering(written.stream_id, item)
        elif item.from_bot:
            item = _speaking(item)
        stored = StoredMessage(written.message_id, written.stream_id, written.person_id, item)
        result = await self._hand_on(stored)
        if item.from_bot:
            return IngressResult(IngressOutcome.RECORDED, stored)
        if result.verdict is Verdict.SUPPRESSED:
            return IngressResult(IngressOutcome.SUPPRESSED, stored)
        return IngressResult(IngressOutcome.ACCEPTED, stored)

    async def _member_changed(self, change: MemberChange, written: NoticeWritten) -> None:
        """Handed on once, however many accounts reported it, told to the group's speaker."""
        book = self._accounts
        group = book is not None and change.stream.kind is StreamKind.GROUP
        if book is not None and group and change.user_id in book.ours:
            if not change.joined:  # one of the bot's accounts: nobody to greet
                book.left(written.stream_id, change.user_id)
            return
        if written.duplicate:
            return
        if book is not None and group:
            stream = change.stream
            speaker = await book.speaker(written.stream_id, stream.external_id, stream.self_id)
            book.answered_by(written.stream_id, speaker)
            change = replace(change, stream=replace(stream, self_id=speaker))
        await self._hand_on_change(StoredChange(written.stream_id, written.person_id, change))

    async def _hand_on_change(self, stored: StoredChange) -> None:
        try:
            await self._next_stage.on_member_change(stored)
        except Exception as exc:
            logger.opt(exception=exc).error("next stage failed for a member change")

    async def _hand_on(self, stored: StoredMessage) -> StageResult:
        stage = self._next_stage
        try:
            if stored.message.from_bot:
                await stage.on_own_message(stored)
                return CONTINUE
            return await stage.on_message(stored)
        except Exception as exc:
            # The message is committed; a failing later stage must not lose it or crash ingress.
            logger.opt(exception=exc).error("next stage failed for message {}", stored.message_id)
            return CONTINUE
