"""Which account an outbox row goes through (docs/accounts.md, "Replies and accounts").

A row names the account it was queued for. A group row that names none goes through the
group's speaker. A row whose account is no longer in the group goes through the speaker. A
row whose account is disconnected waits for it, unless the owner allows a handover: then
another connected account in the group sends it. A private chat is one account's and never
moves.
"""

from __future__ import annotations

from dataclasses import replace

from pallas.core.actions import OutboxKind
from pallas.core.inbound import StreamKind
from pallas.product.conversation.accounts.book import AccountBook
from pallas.store.outbox import OutboxRow


class AccountRouting:
    def __init__(self, book: AccountBook) -> None:
        self._book = book

    async def __call__(self, row: OutboxRow) -> OutboxRow:
        stream = row.stream
        if stream.kind is not StreamKind.GROUP:
            return row
        if row.account is None or await self._may_move(row):
            book = self._book
            speaker = await book.speaker(row.stream_id, stream.external_id, stream.self_id)
            row = replace(row, stream=replace(stream, self_id=speaker))
        return await self._own_ids(row) if await self._book.several(row.stream_id) else row

    async def _own_ids(self, row: OutboxRow) -> OutboxRow:
        """A quote or a reaction names its message by the sending account's own id for it;
        a quote that account never saw is left off (the message still goes)."""
        key = "quote" if row.kind == OutboxKind.MESSAGE else "message_id"
        named = row.payload.get(key)
        if row.kind == OutboxKind.POKE or not isinstance(named, str):
            return row
        own = await self._book.id_for(row.stream_id, named, row.stream.self_id)
        if own == named or (own is None and key == "message_id"):
            return row
        payload = {k: v for k, v in row.payload.items() if k != key}
        return replace(row, payload=payload | ({key: own} if own is not None else {}))

    async def _may_move(self, row: OutboxRow) -> bool:
        """An account removed from the group can never send there: its rows always move.
        A disconnected one's move only when the owner allows it."""
        account = row.stream.self_id
        if not await self._book.in_group(row.stream_id, account):
            return True
        return self._book.rules.handover and not await self._book.is_connected(account)
