"""What the timeline writer learns of a group besides its messages, on each backend:
names, cards, roles, titles, temporary-chat routes, notices, own pokes, forwards, profiles.

Frames come from the NapCat-shaped corpus and go through the real boundary.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import (
    ForwardContent,
    InboundEvent,
    InboundMessage,
    MemberProfile,
    StreamKind,
)
from pallas.platform.onebot.adapter import read_event_frame
from pallas.platform.onebot.send import own_poke
from pallas.platform.onebot.translate import translate_event
from pallas.store.conversation import names_in_stream, window_up_to
from pallas.store.members import temp_chat_group
from pallas.store.models import Event, Identity, Member, Message, Stream
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.napcat_corpus import corpus_frame

BOT = "10000"


def fact(name: str, **changes: Any) -> InboundEvent:
    frame = {**corpus_frame(name), **changes}
    event = read_event_frame(json.dumps(frame, ensure_ascii=False), BOT, now_s=1_764_500_100)
    assert event is not None
    item = translate_event(event).event
    assert item is not None
    return item


async def rows(engine: AsyncEngine, query: Any) -> list[Any]:
    async with engine.connect() as conn:
        return list((await conn.execute(query)).all())


async def poke_count(engine: AsyncEngine) -> int:
    query = select(func.count()).select_from(Message).where(Message.is_poke.is_(True))
    return int((await rows(engine, query))[0][0])


async def member(engine: AsyncEngine, group: str, user_id: str) -> Any:
    query = (
        select(Member.card, Member.role, Member.title)
        .join(Stream, Stream.id == Member.stream_id)
        .join(Identity, Identity.person_id == Member.person_id)
        .where(Stream.external_id == group, Identity.user_id == user_id)
    )
    (row,) = await rows(engine, query)
    return row


async def group_stream(engine: AsyncEngine, group: str) -> Any:
    query = select(Stream.name, Stream.via_group).where(
        Stream.external_id == group, Stream.kind == "group"
    )
    (row,) = await rows(engine, query)
    return row


async def test_03_10_the_group_name_cards_and_roles_are_kept(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    await writer.write(fact("message_group_text"))
    await writer.write(fact("message_group_owner_second_group"))
    assert (await group_stream(engine, "500")).name == "测试群"
    assert (await group_stream(engine, "501")).name == "二群"
    assert tuple(await member(engine, "500", "42")) == ("四号", "member", "")
    assert tuple(await member(engine, "501", "44")) == ("", "owner", "")
    # A later message with a new card updates it; one with no role keeps the known role.
    changed = fact("message_group_text", message_id=7_100_001)
    assert isinstance(changed, InboundMessage)
    renamed = replace(changed, sender=replace(changed.sender, card="四号·改", role=""))
    await writer.write(renamed)
    assert tuple(await member(engine, "500", "42")) == ("四号·改", "member", "")


async def test_10_the_window_shows_the_card_and_names_resolve_per_group(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    written = await writer.write(fact("message_group_text"))
    assert isinstance(written, MessageWritten)
    (line,) = await window_up_to(engine, written.stream_id, written.message_id, 5)
    assert (line.speaker, line.role) == ("四号", "member")
    names = await names_in_stream(engine, written.stream_id, {"42", "99999"})
    assert names == {"42": "四号"}


async def test_12_notices_update_what_the_group_knows_and_are_recorded(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    await writer.write(fact("message_group_text"))
    for name in (
        "notice_group_card",
        "notice_notify_title",
        "notice_group_admin_set",
        "notice_notify_group_name",
        "notice_group_ban",
        "notice_group_ban_whole",
        "notice_group_upload",
    ):
        await writer.write(fact(name))
    assert tuple(await member(engine, "500", "42")) == ("四号·摸鱼中", "admin", "摸鱼大师")
    assert (await group_stream(engine, "500")).name == "测试群·周末版"
    reasons = [
        row.reason
        for row in await rows(engine, select(Event.reason).where(Event.kind == "group_notice"))
    ]
    assert reasons == [
        "card_changed",
        "title_changed",
        "admin_set",
        "group_renamed",
        "member_banned",
        "member_banned",
        "file_uploaded",
    ]
    whole = await rows(
        engine,
        select(Event.person_id, Event.payload).where(Event.kind == "group_notice").offset(5),
    )
    assert whole[0].person_id is None and whole[0].payload["value"] == "-1"


async def test_12_essence_and_reactions_name_the_message_and_likes_count_on_the_bot_only(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    theirs = await writer.write(fact("message_group_text", message_id=7_000_040))
    ours = await writer.write(fact("message_sent_group_self", message_id=7_000_041))
    assert isinstance(theirs, MessageWritten) and isinstance(ours, MessageWritten)
    await writer.write(fact("notice_essence_add", message_id=7_000_040))
    await writer.write(fact("notice_group_msg_emoji_like"))  # on their message: not recorded
    await writer.write(fact("notice_group_msg_emoji_like_remove"))  # on the bot's message
    recorded = await rows(
        engine, select(Event.reason, Event.message_id).where(Event.kind == "group_notice")
    )
    assert [tuple(row) for row in recorded] == [
        ("essence_added", theirs.message_id),
        ("reaction_removed", ours.message_id),
    ]


async def test_11_a_temporary_chat_remembers_its_group(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    temp = fact("message_private_temp")
    assert isinstance(temp, InboundMessage)
    await writer.write(temp)
    assert await temp_chat_group(engine, temp.stream) == "500"
    friend = fact("message_private_friend")
    assert isinstance(friend, InboundMessage)
    await writer.write(friend)
    assert await temp_chat_group(engine, friend.stream) is None


@pytest.mark.parametrize("echo_offset_s", [-2, -1, 0, 1, 2])
@pytest.mark.parametrize("echo_first", [False, True])
async def test_02_an_own_poke_and_its_echo_are_one_row_across_a_second_boundary(
    engine: AsyncEngine, writer: TimelineWriter, echo_offset_s: int, echo_first: bool
) -> None:
    echo = fact("notice_group_poke_by_bot")
    assert isinstance(echo, InboundMessage)
    # The bot's record, on its own clock, a little after (or before) NapCat's second.
    record = own_poke(
        echo.stream, "42", echo.time + timedelta(seconds=echo_offset_s, milliseconds=600)
    )
    first, second = (echo, record) if echo_first else (record, echo)
    assert isinstance(await writer.write(first), MessageWritten)
    outcome = await writer.write(second)
    assert isinstance(outcome, MessageWritten) and outcome.duplicate
    assert await poke_count(engine) == 1


async def test_02_an_own_poke_and_its_echo_in_one_batch_are_one_row(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    echo = fact("notice_friend_poke_by_bot")
    assert isinstance(echo, InboundMessage) and echo.stream.kind is StreamKind.PRIVATE
    record = own_poke(echo.stream, "42", echo.time + timedelta(seconds=1, milliseconds=300))
    outcomes = await asyncio.gather(writer.write(record), writer.write(echo))
    assert sorted(o.duplicate for o in outcomes if isinstance(o, MessageWritten)) == [False, True]
    pokes = await rows(engine, select(Message.from_bot).where(Message.is_poke.is_(True)))
    assert [row.from_bot for row in pokes] == [True]


async def test_02_pokes_of_other_people_are_never_merged(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    await writer.write(fact("notice_group_poke_bot"))
    await writer.write(fact("notice_group_poke_bot", time=1_764_500_041))  # a second poke
    await writer.write(fact("notice_group_poke"))
    assert await poke_count(engine) == 3


async def test_08_fetched_forward_content_fills_in_the_stored_message(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    bare = fact("segment_forward")
    assert isinstance(bare, InboundMessage)
    await writer.write(bare)
    await writer.write(
        ForwardContent(bare.stream, bare.platform_message_id, "7576390011223349999", "甲: 你好")
    )
    (row,) = await rows(
        engine,
        select(Message.text).where(Message.platform_message_id == bare.platform_message_id),
    )
    assert row.text == "[聊天记录:甲: 你好]"


async def test_06_a_member_profile_names_someone_never_seen(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    written = await writer.write(fact("segment_at"))  # @43, who has not spoken yet
    assert isinstance(written, MessageWritten)
    assert await names_in_stream(engine, written.stream_id, {"43"}) == {}
    stream = fact("segment_at")
    assert isinstance(stream, InboundMessage)
    await writer.write(MemberProfile(stream.stream, "43", "小三", card="三哥", role="admin"))
    assert await names_in_stream(engine, written.stream_id, {"43"}) == {"43": "三哥"}
    assert tuple(await member(engine, "500", "43")) == ("三哥", "admin", "")
