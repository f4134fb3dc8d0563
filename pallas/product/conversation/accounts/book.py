"""The bot's accounts as ingress and delivery need them: which are ours, which sit in each
group, which one answers a message and which one speaks for a group (docs/accounts.md).

What must survive a restart is in the store (`stream_account`, the outbox rows' account);
this keeps the working view, loaded per group on first use.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import InboundEvent, InboundMessage, MemberChange, StreamKey, StreamKind
from pallas.product.conversation.accounts.pick import (
    Addressed,
    GroupAccountsView,
    answerer_of,
    speaker_of,
)
from pallas.store.models import Stream, StreamAccount
from pallas.store.shared_chats import id_for_account, quoted

IsConnected = Callable[[str], Awaitable[bool]]


@dataclass(frozen=True)
class AccountRules:
    """What the owner set (.env): names only one account answers to, and whether a
    disconnected account's queued replies may go out through another account in the group."""

    exclusive_names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    handover: bool = False

    @property
    def all_names(self) -> tuple[str, ...]:
        return tuple(name for names in self.exclusive_names.values() for name in names)


class AccountBook:
    def __init__(
        self, engine: AsyncEngine, is_connected: IsConnected, rules: AccountRules
    ) -> None:
        self._engine = engine
        self._is_connected = is_connected
        self.rules = rules
        self._ours: set[str] = set(rules.exclusive_names)
        self._present: dict[int, set[str]] = {}
        self._answering: dict[int, str] = {}  # the account the chat's latest message went to

    async def load(self) -> None:
        """Every account the store has seen: a message from one of them is the bot's own,
        whichever account it reaches through."""
        async with self._engine.connect() as conn:
            self._ours |= set(await conn.scalars(select(Stream.self_id).distinct()))
            self._ours |= set(await conn.scalars(select(StreamAccount.self_id).distinct()))
        self._ours.discard("")

    def refresh(self, elsewhere: frozenset[str]) -> None:
        """Other processes sharing the store hold these accounts, and may have seen them
        join groups since this view was loaded (docs/scaling.md): they are the bot's own,
        and each group's accounts are read again on next use."""
        self._ours |= elsewhere
        self._present.clear()

    @property
    def ours(self) -> frozenset[str]:
        return frozenset(self._ours)

    def as_own(self, msg: InboundMessage) -> InboundMessage:
        """A message sent by another of the bot's accounts is the bot's own: recorded as
        that, and never answered."""
        self._ours.add(msg.stream.self_id)
        sender = msg.sender.user_id
        if msg.from_bot or sender not in self._ours or msg.stream.kind is not StreamKind.GROUP:
            return msg
        return replace(msg, from_bot=True)

    async def answering(self, stream_id: int, msg: InboundMessage) -> InboundMessage:
        """The message as the stages see it: told to the account that answers it."""
        account = msg.stream.self_id
        if msg.stream.kind is not StreamKind.GROUP or await self._alone(stream_id, msg):
            self._answering[stream_id] = account
            return msg
        view = await self.view(stream_id, msg.stream.external_id)
        msg, author = await self._quote_of(stream_id, msg, view)
        mentions = (*msg.mentions, *author)
        addressed = Addressed(account, mentions, "" if msg.is_poke else msg.text)
        account = answerer_of(addressed, view, self.ours, self.rules.exclusive_names)
        self._answering[stream_id] = account
        if account == msg.stream.self_id:
            return msg
        return replace(msg, stream=replace(msg.stream, self_id=account))

    async def _alone(self, stream_id: int, msg: InboundMessage) -> bool:
        """The one account in the group, and the message calls no other: it answers (the
        common case, decided without the rest)."""
        account = msg.stream.self_id
        present = await self._present_in(stream_id)
        if len(present) > 1 or (present and account not in present):
            return False
        return not any(user in self._ours and user != account for user in msg.mentions)

    async def _quote_of(
        self, stream_id: int, msg: InboundMessage, view: GroupAccountsView
    ) -> tuple[InboundMessage, tuple[str, ...]]:
        """A reply to one account's message is that account's to answer; the quote is told
        by the id the message is stored under, whichever account's id it came with."""
        if msg.reply_to is None or len(view.present) < 2:
            return msg, ()
        found = await quoted(self._engine, stream_id, msg.reply_to)
        if found is None:
            return msg, ()
        msg = replace(msg, reply_to=found.platform_message_id)
        return msg, ((found.sender,) if found.from_bot and found.sender in self._ours else ())

    async def several(self, stream_id: int) -> bool:
        """Whether more than one of the bot's accounts is in the group."""
        return len(await self._present_in(stream_id)) > 1

    def answered_by(self, stream_id: int, account: str) -> None:
        self._answering[stream_id] = account

    def answering_account(self, stream_id: int) -> str | None:
        """Who answered the chat's latest message: a responder's message goes out through it."""
        return self._answering.get(stream_id)

    async def saw(self, stream_id: int, account: str) -> None:
        """The account is in the group: it delivered something of it."""
        present = self._present.get(stream_id)
        if present is not None and account in present:
            return  # every message of a group says so again: nothing to do
        self._ours.add(account)
        (await self._present_in(stream_id)).add(account)

    async def delivered(self, stream_id: int, item: InboundEvent) -> None:
        """What an account delivered of a group (a copy of a message included) says it is
        there, unless it is the news of its own removal."""
        account = item.stream.self_id
        if isinstance(item, MemberChange) and item.user_id == account and not item.joined:
            self._ours.add(account)
            return
        await self.saw(stream_id, account)

    async def speaker(self, stream_id: int, group: str, fallback: str) -> str:
        """The account that speaks for the group now (`fallback` when none is known)."""
        return speaker_of(await self.view(stream_id, group), fallback)

    async def speaking_as(self, stream_id: int, stream: StreamKey) -> StreamKey:
        """The chat as the account that speaks in it names it (a turn of the bot's own)."""
        if stream.kind is not StreamKind.GROUP:
            return stream
        speaker = await self.speaker(stream_id, stream.external_id, stream.self_id)
        self._answering[stream_id] = speaker
        return replace(stream, self_id=speaker)

    async def view(self, stream_id: int, group: str) -> GroupAccountsView:
        present = await self._present_in(stream_id)
        connected = frozenset([a for a in present if await self._is_connected(a)])
        return GroupAccountsView(group, frozenset(present), connected)

    async def id_for(self, stream_id: int, platform_id: str, account: str) -> str | None:
        """The account's own id for a message another account's id names."""
        return await id_for_account(self._engine, stream_id, platform_id, account)

    async def is_connected(self, account: str) -> bool:
        return await self._is_connected(account)

    async def in_group(self, stream_id: int, account: str) -> bool:
        return account in await self._present_in(stream_id)

    def left(self, stream_id: int, account: str) -> None:
        self._present.get(stream_id, set()).discard(account)
        if self._answering.get(stream_id) == account:
            del self._answering[stream_id]

    async def _present_in(self, stream_id: int) -> set[str]:
        present = self._present.get(stream_id)
        if present is None:
            query = select(StreamAccount.self_id).where(
                StreamAccount.stream_id == stream_id, StreamAccount.left_at.is_(None)
            )
            async with self._engine.connect() as conn:
                present = set(await conn.scalars(query))
            self._present[stream_id] = present
        return present
