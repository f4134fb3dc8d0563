"""One group, one timeline, whichever accounts see it (docs/accounts.md), on both backends."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.models import Event, Message, MessageCopy, Stream, StreamAccount
from pallas.store.shared_chats import own_id_of
from pallas.store.timeline import MessageWritten, NoticeWritten, TimelineWriter
from tests.support.inbound import group, member_change, message, private, recall

A, B = "10001", "10002"


async def _count(engine: AsyncEngine, model: type, *where: object) -> int:
    async with engine.connect() as conn:
        return (await conn.execute(select(func.count()).select_from(model).where(*where))).scalar()


def seen_by(account: str, text: str, seq: str, pid: str, **kw: object) -> object:
    return replace(
        message(text, stream=group("700", account), platform_message_id=pid, **kw), qq_seq=seq
    )


async def test_the_same_message_through_two_accounts_is_stored_once_with_both_ids(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    # The same millisecond: both copies in one batch.
    first, second = await asyncio.gather(
        writer.write(seen_by(A, "大家好", "9001", "a-1")),
        writer.write(seen_by(B, "大家好", "9001", "b-1")),
    )
    assert isinstance(first, MessageWritten) and isinstance(second, MessageWritten)
    assert sorted([first.duplicate, second.duplicate]) == [False, True]
    assert first.message_id == second.message_id and first.stream_id == second.stream_id
    assert (first if first.duplicate else second).copy is True
    # Later, one after another, and a re-delivery of one account's copy.
    third = await writer.write(seen_by(A, "第二句", "9002", "a-2"))
    fourth = await writer.write(seen_by(B, "第二句", "9002", "b-2"))
    again = await writer.write(seen_by(B, "第二句", "9002", "b-2"))
    assert (third.duplicate, fourth.duplicate, again.duplicate) == (False, True, True)
    assert fourth.message_id == third.message_id == again.message_id
    assert await _count(engine, Message) == 2
    assert await _count(engine, Stream) == 1
    assert await _count(engine, MessageCopy) == 2
    assert {await own_id_of(engine, third.message_id, a) for a in (A, B)} == {"a-2", "b-2"}
    async with engine.connect() as conn:
        accounts = set(await conn.scalars(select(StreamAccount.self_id)))
    assert accounts == {A, B}


async def test_without_a_sequence_number_the_same_sender_text_and_time_is_one_message(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    await writer.write(seen_by(A, "开场", "1", "a-0"))
    await writer.write(seen_by(B, "开场", "1", "b-0"))  # both accounts are known in the group
    at = message("").time
    first = await writer.write(seen_by(A, "没有序号", "", "a-3", time=at))
    # The other NapCat's clock is 3 s behind.
    second = await writer.write(seen_by(B, "没有序号", "", "b-3", time=at - timedelta(seconds=3)))
    assert (first.duplicate, second.duplicate) == (False, True)
    assert first.message_id == second.message_id
    # The same words from the same member through the same account: two messages.
    third = await writer.write(seen_by(A, "没有序号", "", "a-4", time=at))
    assert not third.duplicate
    # A message only one account saw is stored as it came.
    lone = await writer.write(seen_by(B, "只有二号看到", "", "b-5"))
    assert not lone.duplicate
    assert await _count(engine, Message, Message.text == "没有序号") == 2


async def test_a_recall_through_either_account_marks_the_one_message(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    written = await writer.write(seen_by(A, "撤回我", "77", "a-7"))
    await writer.write(seen_by(B, "撤回我", "77", "b-7"))
    notice = await writer.write(recall("b-7", stream=group("700", B)))
    assert isinstance(notice, NoticeWritten) and notice.message_id == written.message_id
    assert await _count(engine, Message, Message.recalled.is_(True)) == 1


async def test_a_join_reported_by_both_accounts_is_handed_on_once(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    await writer.write(seen_by(A, "在", "1", "a-1"))
    await writer.write(seen_by(B, "在", "1", "b-1"))
    first = await writer.write(member_change("4242", joined=True, stream=group("700", A)))
    second = await writer.write(member_change("4242", joined=True, stream=group("700", B)))
    assert (first.duplicate, second.duplicate) == (False, True)
    assert await _count(engine, Event, Event.kind == "member_joined") == 1
    # Account B is kicked: the group's accounts say so.
    await writer.write(member_change(B, joined=False, stream=group("700", A)))
    async with engine.connect() as conn:
        left = await conn.scalar(select(StreamAccount.left_at).where(StreamAccount.self_id == B))
    assert left is not None


async def test_private_chats_stay_each_account_s_own(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    await writer.write(replace(message("私聊", stream=private("42", A)), qq_seq="5"))
    await writer.write(replace(message("私聊", stream=private("42", B)), qq_seq="5"))
    assert await _count(engine, Stream) == 2
    assert await _count(engine, Message) == 2


async def test_the_bot_s_own_message_seen_by_its_other_account_is_one_message(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    await writer.write(seen_by(A, "开场", "1", "a-0"))
    await writer.write(seen_by(B, "开场", "1", "b-0"))
    # A's send, recorded from its receipt (no sequence number), then B's copy with one;
    # then the other way round.
    sent = await writer.write(seen_by(A, "我来了", "", "a-9", user_id=A, from_bot=True))
    copy = await writer.write(seen_by(B, "我来了", "88", "b-9", user_id=A, from_bot=True))
    first = await writer.write(seen_by(B, "又来了", "89", "b-10", user_id=A, from_bot=True))
    late = await writer.write(seen_by(A, "又来了", "", "a-10", user_id=A, from_bot=True))
    assert (sent.duplicate, copy.duplicate, first.duplicate, late.duplicate) == (
        False, True, False, True
    )  # fmt: skip
    assert (copy.message_id, late.message_id) == (sent.message_id, first.message_id)
    # Two different sequence numbers are two messages, however alike.
    one = await writer.write(seen_by(A, "哈哈", "90", "a-11"))
    two = await writer.write(seen_by(B, "哈哈", "91", "b-12"))
    assert not one.duplicate and not two.duplicate
