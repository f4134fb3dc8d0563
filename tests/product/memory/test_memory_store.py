"""The memory store on SQLite and PostgreSQL: writing, merging, caps, recall scope, two-character
keyword queries, correction, forgetting and undo."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.memory.recall_reads import RecallScope, keyword_recall
from pallas.product.memory.store import (
    MemoryKind,
    MemoryLimits,
    MemoryStatus,
    MemoryStore,
    NewMemory,
)
from pallas.product.memory.tables import MemoryTerm
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import group, message

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def _speak(writer: TimelineWriter, user_id: str, room: str = "500") -> MessageWritten:
    written = await writer.write(message("在吗", stream=group(room), user_id=user_id))
    assert isinstance(written, MessageWritten)
    return written


def fact(stream_id: int, person_id: int | None, text: str, **kw: object) -> NewMemory:
    return NewMemory(MemoryKind.FACT, stream_id, person_id, text, "extraction", **kw)  # type: ignore[arg-type]


async def test_a_fact_is_stored_indexed_and_logged(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    ming = await _speak(writer, "42")
    store = MemoryStore(engine)
    [done] = await store.remember(
        [
            fact(
                ming.stream_id,
                ming.person_id,
                "小明喜欢吃榴莲",
                source_message_ids=(ming.message_id,),
            )
        ],
        T0,
        actor="job:1",
    )
    assert not done.merged
    record = await store.get(done.entry_id)
    assert record is not None
    assert (record.text, record.status, record.source_message_ids) == (
        "小明喜欢吃榴莲",
        MemoryStatus.ACTIVE,
        (ming.message_id,),
    )
    assert [c.action for c in await store.changes(done.entry_id)] == ["created"]
    async with engine.connect() as conn:
        terms = set(
            (
                await conn.execute(
                    select(MemoryTerm.term).where(MemoryTerm.entry_id == done.entry_id)
                )
            )
            .scalars()
            .all()
        )
    assert {"榴莲", "小明", "喜欢"} <= terms


async def test_a_two_character_query_finds_the_fact(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    ming = await _speak(writer, "42")
    store = MemoryStore(engine)
    await store.remember(
        [
            fact(ming.stream_id, ming.person_id, "小明喜欢吃榴莲"),
            fact(ming.stream_id, ming.person_id, "小明在上海工作"),
        ],
        T0,
        actor="test",
    )
    scope = RecallScope(ming.stream_id, (ming.person_id,))
    found = await keyword_recall(engine, ["榴莲"], scope, limit=5)
    assert [r.record.text for r in found] == ["小明喜欢吃榴莲"]
    assert found[0].score == 1.0
    assert await keyword_recall(engine, ["披萨"], scope, limit=5) == []


async def test_recall_is_limited_to_the_present_and_to_the_chat(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    ming = await _speak(writer, "42")
    hong = await _speak(writer, "43")
    elsewhere = await _speak(writer, "42", room="600")
    store = MemoryStore(engine)
    await store.remember(
        [
            fact(ming.stream_id, ming.person_id, "小明喜欢吃榴莲"),
            fact(ming.stream_id, hong.person_id, "小红喜欢吃榴莲"),
            fact(ming.stream_id, None, "本群周五晚上一起吃榴莲"),
        ],
        T0,
        actor="test",
    )
    only_ming = RecallScope(ming.stream_id, (ming.person_id,))
    texts = {r.record.text for r in await keyword_recall(engine, ["榴莲"], only_ming, limit=10)}
    assert texts == {"小明喜欢吃榴莲", "本群周五晚上一起吃榴莲"}
    # In another group Ming's fact stays behind until he consents.
    other = RecallScope(elsewhere.stream_id, (ming.person_id,))
    assert await keyword_recall(engine, ["榴莲"], other, limit=10) == []
    await store.grant_consent(ming.person_id, T0)
    texts = {r.record.text for r in await keyword_recall(engine, ["榴莲"], other, limit=10)}
    assert texts == {"小明喜欢吃榴莲"}
    await store.revoke_consent(ming.person_id)
    assert await keyword_recall(engine, ["榴莲"], other, limit=10) == []


async def test_the_same_fact_taught_fifty_times_is_one_entry(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    ming = await _speak(writer, "42")
    store = MemoryStore(engine)
    for i in range(50):
        await store.remember(
            [fact(ming.stream_id, ming.person_id, "小明喜欢吃榴莲", source_message_ids=(i,))],
            T0 + timedelta(minutes=i),
            actor="test",
        )
    [entry] = await store.entries(stream_id=ming.stream_id)
    assert entry.reinforced == 49
    assert entry.confidence == 1.0
    assert len(entry.source_message_ids) == 20  # the newest sources, bounded
    assert entry.last_seen_at == T0 + timedelta(minutes=49)


async def test_a_cap_fades_the_weakest_entry(engine: AsyncEngine, writer: TimelineWriter) -> None:
    ming = await _speak(writer, "42")
    store = MemoryStore(engine, limits=MemoryLimits(facts_per_person=3))
    texts = ["喜欢猫", "讨厌下雨", "会弹钢琴", "住在杭州"]
    for i, text in enumerate(texts):
        confidence = 0.3 if i == 1 else 0.7
        await store.remember(
            [fact(ming.stream_id, ming.person_id, text, confidence=confidence)],
            T0 + timedelta(seconds=i),
            actor="test",
        )
    active = {e.text for e in await store.entries(stream_id=ming.stream_id)}
    assert active == {"喜欢猫", "会弹钢琴", "住在杭州"}
    [faded] = await store.entries(stream_id=ming.stream_id, status=MemoryStatus.FADED)
    assert faded.text == "讨厌下雨"


async def test_correct_forget_and_undo(engine: AsyncEngine, writer: TimelineWriter) -> None:
    ming = await _speak(writer, "42")
    hong = await _speak(writer, "43")
    store = MemoryStore(engine)
    [done] = await store.remember(
        [fact(ming.stream_id, ming.person_id, "小明喜欢吃榴莲")], T0, actor="test"
    )
    scope = RecallScope(ming.stream_id, (ming.person_id, hong.person_id))
    # "You remembered that wrong: it is Hong who likes durian."
    moved = await store.correct(done.entry_id, T0, actor="tool", person_id=hong.person_id)
    assert moved is not None and moved.person_id == hong.person_id
    found = await keyword_recall(
        engine, ["榴莲"], RecallScope(ming.stream_id, (hong.person_id,)), 5
    )
    assert [r.record.id for r in found] == [done.entry_id]
    changed = await store.correct(done.entry_id, T0, actor="tool", text="小红喜欢吃芒果")
    assert changed is not None and changed.text == "小红喜欢吃芒果"
    assert await keyword_recall(engine, ["榴莲"], scope, 5) == []
    forgotten = await store.forget(done.entry_id, T0, actor="tool")
    assert forgotten is not None and forgotten.status is MemoryStatus.FORGOTTEN
    assert await keyword_recall(engine, ["芒果"], scope, 5) == []
    assert await store.forget(done.entry_id, T0, actor="tool") is None  # already gone
    log = await store.changes(done.entry_id)
    assert [c.action for c in log] == ["created", "corrected", "corrected", "forgotten"]
    back = await store.undo(log[-1].id, T0, actor="owner")
    assert back is not None and back.status is MemoryStatus.ACTIVE
    assert [r.record.id for r in await keyword_recall(engine, ["芒果"], scope, 5)] == [
        done.entry_id
    ]


async def test_writes_and_the_cursor_share_one_transaction(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    ming = await _speak(writer, "42")
    store = MemoryStore(engine)
    bad = fact(ming.stream_id, 10**9, "不存在的人")  # no such person: the insert fails
    with pytest.raises(Exception):  # noqa: B017 - the driver's integrity error
        await store.remember(
            [fact(ming.stream_id, ming.person_id, "小明会弹钢琴"), bad],
            T0,
            actor="test",
            cursor=(ming.stream_id, ming.message_id),
        )
    assert await store.entries(stream_id=ming.stream_id) == []
    assert await store.cursor(ming.stream_id) == 0
    await store.remember(
        [fact(ming.stream_id, ming.person_id, "小明会弹钢琴")],
        T0,
        actor="test",
        cursor=(ming.stream_id, ming.message_id),
    )
    assert await store.cursor(ming.stream_id) == ming.message_id
    async with engine.connect() as conn:
        assert await conn.scalar(select(func.count()).select_from(MemoryTerm)) > 0


async def test_a_members_group_rule_waits_unrecalled_until_a_second_member_says_it(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    ming, hong = await _speak(writer, "42"), await _speak(writer, "43")
    room = ming.stream_id
    store = MemoryStore(engine, limits=MemoryLimits(heard=2))
    rule = "本群每周五晚上九点开黑"

    async def say(person: int, text: str = rule, at: int = 0) -> None:
        item = fact(room, None, text, taught_by=person, heard=True)
        await store.remember([item], T0 + timedelta(minutes=at), actor="test")

    async def recalled() -> list[str]:
        scope = RecallScope(room, (ming.person_id,), (MemoryKind.FACT,))
        return [r.record.text for r in await keyword_recall(engine, ["开黑"], scope, 5)]

    await say(ming.person_id)
    await say(ming.person_id, at=1)  # the same member again: still only heard
    assert await store.entries(stream_id=room) == []
    [heard] = await store.entries(stream_id=room, status=MemoryStatus.HEARD)
    assert await recalled() == []
    await say(hong.person_id, at=2)  # a second member: the group's now
    [kept] = await store.entries(stream_id=room)
    assert (kept.id, kept.text, kept.reinforced) == (heard.id, rule, 2)
    assert await recalled() == [rule]
    assert [c.action for c in await store.changes(kept.id)] == [
        "heard",
        "merged",
        "merged",
        "confirmed",
    ]
    # One member's flood of rules is bounded: the oldest waiting ones fade.
    for at, text in enumerate(["群里禁止发广告", "新人进群先改名片", "每月一号交群费"], start=3):
        await say(ming.person_id, text, at)
    waiting = await store.entries(stream_id=room, status=MemoryStatus.HEARD)
    assert {e.text for e in waiting} == {"新人进群先改名片", "每月一号交群费"}


async def test_an_admins_teaching_confirms_what_a_member_said(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    ming, boss = await _speak(writer, "42"), await _speak(writer, "44")
    store = MemoryStore(engine)
    rule = "回复要短一点"
    member = NewMemory(MemoryKind.BEHAVIOR, ming.stream_id, None, rule, "extraction",
                       taught_by=ming.person_id, heard=True)  # fmt: skip
    await store.remember([member], T0, actor="test")
    admin = NewMemory(MemoryKind.BEHAVIOR, ming.stream_id, None, rule, "extraction",
                      taught_by=boss.person_id)  # fmt: skip
    await store.remember([admin], T0, actor="test")
    [kept] = await store.entries(stream_id=ming.stream_id, kind=MemoryKind.BEHAVIOR)
    assert kept.status is MemoryStatus.ACTIVE


async def test_a_confirmation_keeps_the_teachers_words_and_fades_nothing_it_should_not(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    ming, hong = await _speak(writer, "42"), await _speak(writer, "43")
    room = ming.stream_id
    # More active group facts than heard entries may wait: a confirmation must not read the
    # waiting list's cap as the group's.
    store = MemoryStore(engine, limits=MemoryLimits(heard=2, group_facts=10))
    for rule in ("禁止发广告", "新人改名片", "月初交群费", "周日读书会", "不聊政治"):
        await store.remember([fact(room, None, rule)], T0, actor="t")

    async def say(person: int, text: str) -> None:
        item = fact(room, None, text, taught_by=person, heard=True)
        await store.remember([item], T0, actor="test")

    await say(ming.person_id, "本群周五晚上开黑")
    await say(hong.person_id, "本群周五晚上不开黑")  # the opposite claim confirms nothing
    assert len(await store.entries(stream_id=room)) == 5
    await say(hong.person_id, "本群每个周五晚上开黑")  # a longer wording of the same claim
    texts = {e.text for e in await store.entries(stream_id=room)}
    assert len(texts) == 6 and "本群周五晚上开黑" in texts  # the teacher's words, kept
