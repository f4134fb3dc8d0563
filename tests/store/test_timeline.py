"""The timeline writer against a real SQLite database."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.engine import create_engine
from pallas.store.models import Event, Identity, Message, Person, Stream
from pallas.store.timeline import MessageWritten, NoticeWritten, TimelineWriter, WriterClosedError
from tests.support.inbound import group, member_change, message, recall


async def _count(engine: AsyncEngine, model: type, *where: object) -> int:
    async with engine.connect() as conn:
        return (await conn.execute(select(func.count()).select_from(model).where(*where))).scalar()


async def test_concurrent_writes_share_transactions(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    commits = []
    event.listen(engine.sync_engine, "commit", lambda _conn: commits.append(1))
    items = [message(f"m{i}", user_id=str(i % 10), stream=group(str(i % 4))) for i in range(300)]
    outcomes = await asyncio.gather(*(writer.write(item) for item in items))
    assert all(isinstance(o, MessageWritten) and not o.duplicate for o in outcomes)
    assert len({o.message_id for o in outcomes}) == 300
    assert len(commits) <= 10, f"{len(commits)} commits for 300 concurrent writes"
    assert await _count(engine, Message) == 300
    assert await _count(engine, Stream) == 4
    assert await _count(engine, Person) == 10
    assert await _count(engine, Event, Event.kind == "inbound") == 300


async def test_a_caller_resumes_only_after_its_row_is_committed(
    migrated_url: str, engine: AsyncEngine, writer: TimelineWriter
) -> None:
    other = create_engine(migrated_url)  # another engine: sees only committed rows

    async def write_then_look(i: int) -> int:
        written = await writer.write(message(f"c{i}"))
        return await _count(other, Message, Message.id == written.message_id)

    seen = await asyncio.gather(*(write_then_look(i) for i in range(50)))
    await other.dispose()
    assert seen == [1] * 50


async def test_duplicates_in_one_batch_and_across_batches(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    item = message("一次", platform_message_id="dup-1")
    first, second = await asyncio.gather(writer.write(item), writer.write(item))
    third = await writer.write(item)
    assert [first.duplicate, second.duplicate, third.duplicate] == [False, True, True]
    assert first.message_id == second.message_id == third.message_id
    assert await _count(engine, Message) == 1
    assert await _count(engine, Event, Event.kind == "inbound") == 1
    assert (
        await _count(
            engine, Event, Event.kind == "inbound_duplicate", Event.message_id == first.message_id
        )
        == 2
    )


async def test_one_bad_item_does_not_sink_its_batch(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    good = [message(f"g{i}") for i in range(5)]
    bad = message("naive time", time=datetime(2026, 1, 1))  # the store refuses naive times
    results = await asyncio.gather(
        *(writer.write(i) for i in (*good[:2], bad, *good[2:])), return_exceptions=True
    )
    assert isinstance(results[2], Exception)
    assert all(isinstance(r, MessageWritten) for i, r in enumerate(results) if i != 2)
    assert await _count(engine, Message) == 5
    assert (await writer.write(message("after"))).duplicate is False


async def test_bot_messages_are_recorded_without_an_inbound_event(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    written = await writer.write(message("我说的", user_id="10000", from_bot=True))
    async with engine.connect() as conn:
        row = (await conn.execute(select(Message).where(Message.id == written.message_id))).one()
    assert row.from_bot is True
    assert await _count(engine, Event, Event.kind == "inbound") == 0


async def test_recall_marks_and_keeps_the_message(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    written = await writer.write(message("撤回我", platform_message_id="r-1"))
    outcome = await writer.write(recall("r-1"))
    missing = await writer.write(recall("never-seen"))
    assert isinstance(outcome, NoticeWritten) and outcome.message_id == written.message_id
    assert isinstance(missing, NoticeWritten) and missing.message_id is None
    async with engine.connect() as conn:
        row = (await conn.execute(select(Message).where(Message.id == written.message_id))).one()
        reasons = (
            (
                await conn.execute(
                    select(Event.reason).where(Event.kind == "message_recalled").order_by(Event.id)
                )
            )
            .scalars()
            .all()
        )
    assert row.recalled is True and row.text == "撤回我"
    assert reasons == ["", "not_in_timeline"]


async def test_member_changes_go_to_the_ledger(engine: AsyncEngine, writer: TimelineWriter) -> None:
    await writer.write(member_change("77", joined=True))
    await writer.write(member_change("77", joined=False))
    assert await _count(engine, Event, Event.kind == "member_joined") == 1
    assert await _count(engine, Event, Event.kind == "member_left") == 1
    assert await _count(engine, Message) == 0


async def test_nickname_changes_follow_the_platform(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    first = await writer.write(message("a", nickname="旧名"))
    second = await writer.write(message("b", nickname="新名"))
    assert first.person_id == second.person_id
    async with engine.connect() as conn:
        name = (
            await conn.execute(select(Person.display_name).where(Person.id == first.person_id))
        ).scalar()
        nick = (await conn.execute(select(Identity.nickname))).scalar()
    assert name == nick == "新名"


async def test_identity_survives_a_new_writer(engine: AsyncEngine) -> None:
    one = TimelineWriter(engine)
    one.start()
    first = await one.write(message("x", user_id="9"))
    await one.close()
    two = TimelineWriter(engine)  # empty caches: resolution must come from the store
    two.start()
    second = await two.write(message("y", user_id="9"))
    await two.close()
    assert (first.person_id, first.stream_id) == (second.person_id, second.stream_id)


async def test_close_commits_what_was_accepted_then_refuses(engine: AsyncEngine) -> None:
    writer = TimelineWriter(engine)
    writer.start()
    pending = [asyncio.ensure_future(writer.write(message(f"p{i}"))) for i in range(20)]
    await asyncio.sleep(0)
    await writer.close()
    assert all(not p.result().duplicate for p in pending)
    assert await _count(engine, Message) == 20
    with pytest.raises(WriterClosedError):
        await writer.write(message("late"))


async def test_a_nameless_sighting_never_erases_a_name(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    named = message("a", user_id="61", nickname="Alice")
    nameless = message("[戳一戳 → 10000]", user_id="61", nickname="")
    both = await asyncio.gather(writer.write(named), writer.write(nameless))
    later = await writer.write(message("b", user_id="61", nickname=""))
    assert both[0].person_id == both[1].person_id == later.person_id
    async with engine.connect() as conn:
        name = (await conn.execute(select(Person.display_name))).scalar()
    assert name == "Alice"
