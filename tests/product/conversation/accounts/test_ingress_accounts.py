"""The ingress with several accounts, on a real store: a group's message goes on once, told
to the account that answers it; the bot's other account is never a member; a kicked account
leaves the group for good (docs/accounts.md)."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import InboundMessage
from pallas.product.conversation.accounts.book import AccountBook, AccountRules
from pallas.product.conversation.ingress import (
    CONTINUE,
    Ingress,
    IngressOutcome,
    StageResult,
    StoredChange,
    StoredMessage,
)
from pallas.store.timeline import TimelineWriter
from tests.support.inbound import group, member_change, message

A, B = "52001", "52002"


class Stages:
    def __init__(self) -> None:
        self.members: list[StoredMessage] = []
        self.own: list[StoredMessage] = []
        self.changes: list[StoredChange] = []

    async def on_message(self, stored: StoredMessage) -> StageResult:
        self.members.append(stored)
        return CONTINUE

    async def on_own_message(self, stored: StoredMessage) -> None:
        self.own.append(stored)

    async def on_member_change(self, stored: StoredChange) -> None:
        self.changes.append(stored)


async def connected(account: str) -> bool:
    return True


def through(account: str, text: str, seq: str, **kw: object) -> InboundMessage:
    stream = group("700", account)
    return replace(message(text, stream=stream, platform_message_id=f"{account}-{seq}", **kw),
                   qq_seq=seq)  # fmt: skip


async def test_one_hand_on_per_message_told_to_its_answerer(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    stages = Stages()
    book = AccountBook(engine, connected, AccountRules({B: ("小二",)}))
    ingress = Ingress(writer, stages)
    ingress.plug_accounts(book)
    for account in (A, B):
        await ingress.accept(through(account, "大家好", "1"))
    for account in (B, A):  # the other order: B's copy first
        await ingress.accept(through(account, "小二 在吗", "2"))
    results = [await ingress.accept(through(a, "@二号", "3", mentions=(B,))) for a in (A, B)]
    assert [r.outcome for r in results] == [IngressOutcome.ACCEPTED, IngressOutcome.DUPLICATE]
    assert [s.message.text for s in stages.members] == ["大家好", "小二 在吗", "@二号"]
    speaker = stages.members[0].message.stream.self_id
    assert [s.message.stream.self_id for s in stages.members] == [speaker, B, B]
    # B's message, seen by A: the bot's own, never a member's, told as B's.
    said = await ingress.accept(through(A, "在的", "4", user_id=B))
    assert said.outcome is IngressOutcome.RECORDED
    assert [s.message.stream.self_id for s in stages.own] == [B]
    assert len(stages.members) == 3


async def test_a_kicked_account_leaves_and_its_group_greets_nobody_for_it(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    stages = Stages()
    book = AccountBook(engine, connected, AccountRules())
    ingress = Ingress(writer, stages)
    ingress.plug_accounts(book)
    for account in (A, B):
        await ingress.accept(through(account, "大家好", "1"))
    sid = stages.members[0].stream_id
    assert await book.several(sid)
    # A reports B's removal first; B's own report of it comes second (a duplicate).
    await ingress.accept(member_change(B, joined=False, stream=group("700", A)))
    await ingress.accept(member_change(B, joined=False, stream=group("700", B)))
    assert not await book.in_group(sid, B)
    assert await book.speaker(sid, "700", B) == A
    assert stages.changes == []  # no farewell for the bot's own account
    # A newcomer is greeted once, though both report the join.
    for account in (A, B):
        await ingress.accept(member_change("4242", joined=True, stream=group("700", account)))
    assert [c.change.user_id for c in stages.changes] == ["4242"]
