"""The plans store on SQLite and PostgreSQL: promises (kept, listed, closed, expired) and what
a follow-up asks when its time comes (was anything said since a mark, did a turn reply)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKey
from pallas.product.persona.promise_store import (
    NewPromise,
    PromiseState,
    PromiseStore,
    SaidSince,
    StoredPromise,
    said_since,
    turn_sent_words,
)
from pallas.product.persona.tables import Promise
from pallas.store.models import Reply
from pallas.store.outbox import NewItem, OutboxStore
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import BOT_ID, group, message, private

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OTHER_BOT = "10001"


async def said(
    writer: TimelineWriter,
    text: str = "你好",
    *,
    user: str = "7",
    stream: StreamKey | None = None,
    from_bot: bool = False,
) -> MessageWritten:
    written = await writer.write(
        message(text, stream=stream or private(user), user_id=user, time=T0, from_bot=from_bot)
    )
    assert isinstance(written, MessageWritten)
    return written


@dataclass(frozen=True)
class Chat:
    stream_id: int
    person_id: int
    self_id: str = BOT_ID

    def promise(
        self, text: str, due_at: datetime | None = None, turn_id: int | None = 1
    ) -> NewPromise:
        return NewPromise(self.self_id, self.stream_id, self.person_id, text, due_at, turn_id)


async def chat(writer: TimelineWriter, stream: StreamKey | None = None) -> Chat:
    stream = stream or private("7")
    who = await said(writer, stream=stream)
    return Chat(who.stream_id, who.person_id, stream.self_id)


async def closed_at(engine: AsyncEngine, promise_id: int) -> datetime | None:
    async with engine.connect() as conn:
        return await conn.scalar(select(Promise.closed_at).where(Promise.id == promise_id))


async def state_of(store: PromiseStore, promise_id: int) -> PromiseState:
    stored = await store.get(promise_id)
    assert stored is not None
    return stored.state


# --- promises --------------------------------------------------------------------------------


async def test_a_promise_is_kept_open_and_read_back(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PromiseStore(engine)
    owner = await chat(writer)
    due = T0 + timedelta(hours=20)
    timed = await store.add(owner.promise("提醒开会", due, turn_id=12), T0)
    untimed = await store.add(owner.promise("记着买牛奶", None, turn_id=None), T0)
    assert timed != untimed
    assert await store.get(timed) == StoredPromise(
        timed, BOT_ID, owner.stream_id, owner.person_id, "提醒开会", T0, due, PromiseState.OPEN
    )
    back = await PromiseStore(engine).get(untimed)  # another store on the same database
    assert back is not None
    assert (back.text, back.due_at, back.state) == ("记着买牛奶", None, PromiseState.OPEN)
    assert back.made_at == T0 and back.made_at.tzinfo is not None
    async with engine.connect() as conn:
        turn_ids = (await conn.execute(select(Promise.turn_id).order_by(Promise.id))).scalars()
        assert list(turn_ids) == [12, None]
    assert await closed_at(engine, timed) is None


async def test_an_unknown_promise_is_none(engine: AsyncEngine) -> None:
    assert await PromiseStore(engine).get(404) is None


async def test_a_long_promise_is_cut_to_the_column(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PromiseStore(engine)
    owner = await chat(writer)
    promise_id = await store.add(owner.promise("好" * 300), T0)
    stored = await store.get(promise_id)
    assert stored is not None and stored.text == "好" * 200


async def test_a_chat_s_open_promises_newest_first_untimed_ones_only_while_fresh(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PromiseStore(engine)
    owner = await chat(writer)
    elsewhere = await chat(writer, group("500"))
    week_ago = T0 - timedelta(days=7)
    old_untimed = await store.add(owner.promise("很久以前答应的"), week_ago)
    old_timed = await store.add(owner.promise("下周提醒", T0 + timedelta(days=3)), week_ago)
    fresh = await store.add(owner.promise("记着买牛奶"), T0)
    kept = await store.add(owner.promise("已经提醒过了", T0 + timedelta(minutes=5)), T0)
    await store.close(kept, PromiseState.KEPT, T0)
    await store.add(elsewhere.promise("别的群的事"), T0)

    cut = T0 - timedelta(days=1)
    shown = await store.open_in(owner.stream_id, cut, limit=10)
    assert [p.id for p in shown] == [fresh, old_timed]  # the old untimed one counts as gone
    assert all(p.state is PromiseState.OPEN for p in shown)
    assert [p.id for p in await store.open_in(owner.stream_id, cut, limit=1)] == [fresh]
    # The cut is inclusive: an untimed promise made at exactly that moment is still shown.
    everything = await store.open_in(owner.stream_id, week_ago, limit=10)
    assert [p.id for p in everything] == [fresh, old_timed, old_untimed]
    assert await store.open_in(owner.stream_id + 1000, cut, limit=10) == []


async def test_an_account_s_promises_in_every_state_newest_first(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PromiseStore(engine)
    mine = await chat(writer)
    in_group = await chat(writer, group("500"))
    theirs = await chat(writer, private("7", self_id=OTHER_BOT))
    first = await store.add(mine.promise("一"), T0)
    second = await store.add(in_group.promise("二", T0 + timedelta(hours=1)), T0)
    third = await store.add(mine.promise("三"), T0)
    await store.add(theirs.promise("另一个号的"), T0)
    await store.close(first, PromiseState.DROPPED, T0)

    listed = await store.of_account(BOT_ID)
    assert [(p.id, p.state) for p in listed] == [
        (third, PromiseState.OPEN),
        (second, PromiseState.OPEN),
        (first, PromiseState.DROPPED),
    ]
    assert [p.id for p in await store.of_account(BOT_ID, limit=2)] == [third, second]
    assert [p.text for p in await store.of_account(OTHER_BOT)] == ["另一个号的"]
    assert await store.of_account("99999") == []


async def test_a_promise_is_closed_only_while_it_is_open(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PromiseStore(engine)
    owner = await chat(writer)
    promise_id = await store.add(owner.promise("提醒开会", T0 + timedelta(hours=1)), T0)
    later = T0 + timedelta(hours=1)
    assert await store.close(promise_id, PromiseState.KEPT, later) is True
    stored = await store.get(promise_id)
    assert stored is not None and stored.state is PromiseState.KEPT
    assert await closed_at(engine, promise_id) == later

    # Closed once: an owner taking it back afterwards changes nothing, not even the time.
    assert await store.close(promise_id, PromiseState.DROPPED, later + timedelta(hours=1)) is False
    stored = await store.get(promise_id)
    assert stored is not None and stored.state is PromiseState.KEPT
    assert await closed_at(engine, promise_id) == later
    assert await store.close(404, PromiseState.DROPPED, later) is False


async def test_only_untimed_promises_older_than_the_cut_expire(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PromiseStore(engine)
    owner = await chat(writer)
    week_ago = T0 - timedelta(days=7)
    old_untimed = await store.add(owner.promise("很久以前答应的"), week_ago)
    old_timed = await store.add(owner.promise("到点再说", T0 + timedelta(days=1)), week_ago)
    old_dropped = await store.add(owner.promise("收回了"), week_ago)
    await store.close(old_dropped, PromiseState.DROPPED, week_ago)
    at_the_cut = await store.add(owner.promise("正好在边上"), T0 - timedelta(days=1))
    fresh = await store.add(owner.promise("记着买牛奶"), T0)

    assert await store.expire(T0 - timedelta(days=1), T0) == 1
    states = {pid: await state_of(store, pid) for pid in (old_untimed, old_timed, old_dropped)}
    assert states == {
        old_untimed: PromiseState.EXPIRED,
        old_timed: PromiseState.OPEN,  # a timed one waits for its time, however old
        old_dropped: PromiseState.DROPPED,  # already closed: left as it was
    }
    assert await closed_at(engine, old_untimed) == T0
    assert await closed_at(engine, old_dropped) == week_ago
    for still_open in (at_the_cut, fresh):  # made at or after the cut
        assert await state_of(store, still_open) is PromiseState.OPEN
    assert await store.expire(T0 - timedelta(days=1), T0) == 0  # nothing left to expire


# --- what a follow-up asks -------------------------------------------------------------------


async def reply_row(engine: AsyncEngine, stream_id: int, turn_id: int | None) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            insert(Reply).values(
                turn_id=turn_id, stream_id=stream_id, bubbles=["嗯"], quote=None, created_at=T0
            )
        )


async def test_said_since_counts_others_messages_after_the_mark(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    stream = private("7")
    mark = await said(writer, "在吗", stream=stream)
    sid = mark.stream_id
    assert await said_since(engine, sid, mark.message_id, 10) == SaidSince(theirs=0, bots=0)

    # The bot's own lines in the timeline (receipts of its replies) are not theirs.
    await said(writer, "在的", user=BOT_ID, stream=stream, from_bot=True)
    assert await said_since(engine, sid, mark.message_id, 10) == SaidSince(0, 0)
    # Nor is anything said in another chat.
    await said(writer, "群里聊天", user="7", stream=group("500"))
    assert await said_since(engine, sid, mark.message_id, 10) == SaidSince(0, 0)

    newer = await said(writer, "还有个事", stream=stream)
    await said(writer, "就是那个", stream=stream)
    assert await said_since(engine, sid, mark.message_id, 10) == SaidSince(theirs=2, bots=0)
    assert await said_since(engine, sid, newer.message_id, 10) == SaidSince(theirs=1, bots=0)
    # Messages at or before the mark are the turn's own batch.
    assert await said_since(engine, sid, mark.message_id - 1, 10) == SaidSince(theirs=3, bots=0)


async def test_said_since_counts_the_bot_s_replies_of_later_turns_only(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    stream = private("7")
    mark = await said(writer, "在吗", stream=stream)
    sid = mark.stream_id
    other = (await said(writer, "群里", stream=group("500"))).stream_id
    await reply_row(engine, sid, 10)  # the turn's own reply, whenever it lands
    await reply_row(engine, sid, 9)  # an earlier turn's
    await reply_row(engine, other, 11)  # a later turn in another chat
    await reply_row(engine, sid, None)  # not a turn's
    assert await said_since(engine, sid, mark.message_id, 10) == SaidSince(theirs=0, bots=0)

    await reply_row(engine, sid, 11)
    await reply_row(engine, sid, 14)
    assert await said_since(engine, sid, mark.message_id, 10) == SaidSince(theirs=0, bots=2)
    assert await said_since(engine, sid, mark.message_id, 11) == SaidSince(theirs=0, bots=1)
    assert await said_since(engine, sid, mark.message_id, 8) == SaidSince(theirs=0, bots=4)


async def test_both_counts_at_once(engine: AsyncEngine, writer: TimelineWriter) -> None:
    stream = private("7")
    mark = await said(writer, "在吗", stream=stream)
    await said(writer, "人呢", stream=stream)
    await reply_row(engine, mark.stream_id, 21)
    assert await said_since(engine, mark.stream_id, mark.message_id, 20) == SaidSince(1, 1)


async def test_a_turn_sent_words_only_with_a_reply_of_its_own(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    sid = (await said(writer)).stream_id
    outbox = OutboxStore(engine)
    assert await turn_sent_words(engine, 30) is False

    # A poke or a reaction queues an outbox row but records no reply.
    await outbox.enqueue(30, sid, [NewItem("poke", {"user_id": "7"})], T0)
    await outbox.enqueue(30, sid, [NewItem("react", {"message_id": 1, "emoji": "赞"})], T0)
    assert await turn_sent_words(engine, 30) is False

    # Words go out with their reply record.
    await outbox.enqueue(31, sid, [NewItem("message", {"text": "好"})], T0, bubbles=("好",))
    assert await turn_sent_words(engine, 31) is True
    assert await turn_sent_words(engine, 30) is False  # another turn's reply is not this one's

    await reply_row(engine, sid, 32)  # a reply row however it was written
    assert await turn_sent_words(engine, 32) is True
