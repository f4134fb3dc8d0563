"""The outbox store on a real database: rows, backpressure, heads, marks and echo matching."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import Segment, SegmentKind, Sender, StreamKind
from pallas.platform.onebot.send import own_message
from pallas.store.engine import create_engine
from pallas.store.models import Message, OutboxItem, Reply, Stream
from pallas.store.outbox import (
    MAX_ERROR_CHARS,
    DroppedRow,
    NewItem,
    OutboxRow,
    OutboxStatus,
    OutboxStore,
)
from pallas.store.timeline import TimelineWriter
from tests.support.inbound import BOT_ID, group

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
_platform_ids = itertools.count(1)


async def _stream(writer: TimelineWriter, external: str) -> int:
    written = await writer.write(own_message(group(external), (), f"seed-{external}", T0))
    return written.stream_id  # type: ignore[union-attr]


def _bubble(text: str, delay_s: float = 0.0) -> NewItem:
    return NewItem("message", {"text": text}, delay_s)


async def _rows(engine: AsyncEngine) -> list[Any]:
    async with engine.connect() as conn:
        return list((await conn.execute(select(OutboxItem).order_by(OutboxItem.id))).all())


async def _statuses(engine: AsyncEngine) -> dict[int, str]:
    return {row.id: row.status for row in await _rows(engine)}


async def _set_status(engine: AsyncEngine, status: OutboxStatus, *ids: int) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            update(OutboxItem).where(OutboxItem.id.in_(ids)).values(status=status.value)
        )


# --- enqueue -----------------------------------------------------------------------------


async def test_a_reply_is_recorded_with_its_rows_paced_after_one_another(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = OutboxStore(engine)
    sid = await _stream(writer, "q1")
    items = [_bubble("一", 0.5), _bubble("二", 1.5), NewItem("poke", {"user_id": "42"}, 2.0)]
    queued = await store.enqueue(7, sid, items, T0, bubbles=("一", "二"), quote="555", direct=True)
    async with engine.connect() as conn:
        [reply] = (await conn.execute(select(Reply))).all()
    assert (reply.turn_id, reply.stream_id, reply.bubbles, reply.quote, reply.created_at) == (
        7,
        sid,
        ["一", "二"],
        "555",
        T0,
    )
    rows = await _rows(engine)
    assert [row.id for row in rows] == queued.ids and queued.dropped == []
    # Each item's delay counts from the one before it, not from the reply.
    assert [row.not_before for row in rows] == [
        T0 + timedelta(seconds=0.5),
        T0 + timedelta(seconds=2.0),
        T0 + timedelta(seconds=4.0),
    ]
    assert [(row.kind, row.payload) for row in rows] == [
        ("message", {"text": "一"}),
        ("message", {"text": "二"}),
        ("poke", {"user_id": "42"}),
    ]
    for row in rows:
        assert (row.reply_id, row.turn_id, row.stream_id, row.direct) == (reply.id, 7, sid, True)
        assert (row.status, row.attempts, row.last_error) == ("pending", 0, "")
        assert (row.created_at, row.updated_at, row.platform_message_id) == (T0, T0, None)


async def test_actions_without_bubbles_have_no_reply_record(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = OutboxStore(engine)
    sid = await _stream(writer, "q2")
    queued = await store.enqueue(None, sid, [NewItem("react", {"emoji": "76"})], T0)
    async with engine.connect() as conn:
        assert (await conn.execute(select(Reply))).all() == []
    [row] = await _rows(engine)
    assert [row.id] == queued.ids and queued.dropped == []
    assert (row.reply_id, row.turn_id, row.direct, row.not_before) == (None, None, False, T0)


# --- backpressure ------------------------------------------------------------------------


async def _reply(
    store: OutboxStore,
    sid: int,
    *texts: str,
    turn: int = 1,
    direct: bool = False,
    max_waiting: int | None = 2,
) -> Any:
    return await store.enqueue(
        turn,
        sid,
        [_bubble(text) for text in texts],
        T0,
        bubbles=texts,
        direct=direct,
        max_waiting=max_waiting,
    )


@pytest.mark.parametrize(
    ("max_waiting", "kept"),
    [
        pytest.param(None, ["二", "三", "四"], id="no bound: nothing dropped"),
        pytest.param(3, ["二", "三", "四"], id="room for three"),
        pytest.param(2, ["三", "四"], id="two may wait: the oldest goes"),
        pytest.param(1, ["四"], id="one may wait: only the new one"),
        pytest.param(0, ["四"], id="zero still keeps the new one"),
    ],
)
async def test_an_unsolicited_reply_keeps_at_most_max_waiting_unsolicited_ones_waiting(
    engine: AsyncEngine, writer: TimelineWriter, max_waiting: int | None, kept: list[str]
) -> None:
    store = OutboxStore(engine)
    sid = await _stream(writer, "bp")
    await _reply(store, sid, "一", max_waiting=None)  # the head: never dropped
    await _reply(store, sid, "二", max_waiting=None)
    await _reply(store, sid, "三", max_waiting=None)
    await _reply(store, sid, "四", max_waiting=max_waiting)
    open_texts = [
        row.payload["text"] for row in await _rows(engine) if row.status in ("pending", "sending")
    ]
    assert open_texts == ["一", *kept]


async def test_dropped_rows_are_reported_and_marked_per_whole_reply(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = OutboxStore(engine)
    sid = await _stream(writer, "bp2")
    await _reply(store, sid, "头", turn=1)
    older = await _reply(store, sid, "旧一", "旧二", turn=2)
    newer = await _reply(store, sid, "新", turn=3)
    later = T0 + timedelta(minutes=1)
    queued = await store.enqueue(
        4, sid, [_bubble("又一个")], later, bubbles=("又一个",), max_waiting=2
    )
    async with engine.connect() as conn:
        reply_of = dict((await conn.execute(select(OutboxItem.id, OutboxItem.reply_id))).all())
    assert queued.dropped == [
        DroppedRow(older.ids[0], 2, reply_of[older.ids[0]]),
        DroppedRow(older.ids[1], 2, reply_of[older.ids[1]]),
    ]
    rows = {row.id: row for row in await _rows(engine)}
    for row_id in older.ids:
        assert (rows[row_id].status, rows[row_id].updated_at) == ("dropped", later)
    assert rows[newer.ids[0]].status == "pending" and rows[newer.ids[0]].updated_at == T0


async def test_a_direct_reply_drops_every_waiting_unsolicited_one_but_no_direct_one(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = OutboxStore(engine)
    sid = await _stream(writer, "bp3")
    head = await _reply(store, sid, "头")
    asked = await _reply(store, sid, "回答", direct=True)
    chatter = [await _reply(store, sid, f"闲聊{i}", max_waiting=5) for i in range(2)]
    answer = await _reply(store, sid, "再回答", direct=True, max_waiting=5)
    assert [d.id for d in answer.dropped] == [c.ids[0] for c in chatter]
    statuses = await _statuses(engine)
    assert [statuses[r.ids[0]] for r in (head, asked, answer)] == ["pending"] * 3


async def test_a_direct_reply_without_a_bound_still_drops_the_chatter(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = OutboxStore(engine)
    sid = await _stream(writer, "bp4")
    await _reply(store, sid, "头")
    chatter = await _reply(store, sid, "闲聊")
    answer = await _reply(store, sid, "回答", direct=True, max_waiting=None)
    assert [d.id for d in answer.dropped] == chatter.ids


async def test_actions_without_a_reply_never_drop_anything(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = OutboxStore(engine)
    sid = await _stream(writer, "bp5")
    await _reply(store, sid, "头")
    chatter = await _reply(store, sid, "闲聊")
    poke = await store.enqueue(1, sid, [NewItem("poke", {"user_id": "42"})], T0, direct=True)
    assert poke.dropped == []
    assert (await _statuses(engine))[chatter.ids[0]] == "pending"
    # A bare action in the queue is no reply either: a later bound leaves it alone.
    await _reply(store, sid, "又一个", max_waiting=1)
    assert (await _statuses(engine))[poke.ids[0]] == "pending"


async def test_the_head_is_the_oldest_open_reply_of_this_chat(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = OutboxStore(engine)
    sid, other = await _stream(writer, "bp6"), await _stream(writer, "bp6-other")
    done = await _reply(store, sid, "已发")
    await _set_status(engine, OutboxStatus.SENT, *done.ids)
    head = await _reply(store, sid, "正在发")
    waiting = await _reply(store, sid, "等着")
    elsewhere = await _reply(store, other, "别的群")
    queued = await _reply(store, sid, "新的", max_waiting=1)
    assert [d.id for d in queued.dropped] == waiting.ids
    statuses = await _statuses(engine)
    assert statuses[head.ids[0]] == "pending" and statuses[elsewhere.ids[0]] == "pending"
    assert statuses[done.ids[0]] == "sent"


async def test_a_head_already_being_sent_is_still_the_head(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    # Its first bubble is out: dropping the rest would cut the reply in half.
    store = OutboxStore(engine)
    sid = await _stream(writer, "bp8")
    head = await _reply(store, sid, "已发", "正在发")
    await store.mark(head.ids[0], OutboxStatus.SENT, T0)
    await store.mark(head.ids[1], OutboxStatus.SENDING, T0)
    waiting = await _reply(store, sid, "等着")
    queued = await _reply(store, sid, "新的", max_waiting=1)
    assert [d.id for d in queued.dropped] == waiting.ids
    statuses = await _statuses(engine)
    assert [statuses[row_id] for row_id in head.ids] == ["sent", "sending"]


async def test_a_reply_with_no_rows_in_an_empty_chat_drops_nothing(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = OutboxStore(engine)
    sid = await _stream(writer, "bp7")
    queued = await store.enqueue(1, sid, [], T0, bubbles=("空",), direct=True)
    assert (queued.ids, queued.dropped) == ([], [])


# --- reading the queue -------------------------------------------------------------------


async def test_heads_are_the_oldest_open_row_of_each_chat_oldest_first(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = OutboxStore(engine)
    a, b, c = [await _stream(writer, name) for name in ("h-a", "h-b", "h-c")]
    a_done = await store.enqueue(1, a, [_bubble("a0")], T0)
    b_first = await store.enqueue(2, b, [_bubble("b1"), _bubble("b2", 3)], T0, bubbles=("b1",))
    a_open = await store.enqueue(3, a, [_bubble("a1"), _bubble("a2")], T0)
    c_failed = await store.enqueue(4, c, [_bubble("c0")], T0)
    await _set_status(engine, OutboxStatus.SENT, *a_done.ids)
    await _set_status(engine, OutboxStatus.FAILED, *c_failed.ids)
    await store.mark(b_first.ids[0], OutboxStatus.SENDING, T0 + timedelta(seconds=9), attempts=2)
    heads = await store.heads()
    assert [head.id for head in heads] == [b_first.ids[0], a_open.ids[0]]
    async with engine.connect() as conn:
        [reply_id] = (await conn.execute(select(Reply.id))).scalars().all()
    assert heads[0].stream_since is not None  # when the chat was first stored: its warm-up
    assert replace(heads[0], stream_since=None) == OutboxRow(
        id=b_first.ids[0],
        reply_id=reply_id,
        turn_id=2,
        stream_id=b,
        stream=group("h-b"),
        kind="message",
        payload={"text": "b1"},
        status="sending",
        attempts=2,
        not_before=T0,
        created_at=T0,
        updated_at=T0 + timedelta(seconds=9),
    )
    assert heads[0].stream.kind is StreamKind.GROUP
    assert [head.id for head in await store.heads(limit=1)] == [b_first.ids[0]]


async def test_heads_are_bounded_to_two_hundred_chats_by_default(engine: AsyncEngine) -> None:
    # A bound keeps one pass of the dispatcher small however many chats wait.
    async with engine.begin() as conn:
        for n in range(201):
            result = await conn.execute(
                insert(Stream).values(
                    platform="qq",
                    self_id=BOT_ID,
                    kind=StreamKind.GROUP.value,
                    external_id=f"many-{n}",
                    created_at=T0,
                )
            )
            await conn.execute(
                insert(OutboxItem).values(
                    stream_id=result.inserted_primary_key[0],
                    kind="message",
                    payload={"text": str(n)},
                    status="pending",
                    not_before=T0,
                    created_at=T0,
                    updated_at=T0,
                )
            )
    heads = await OutboxStore(engine).heads()
    assert [head.payload["text"] for head in heads] == [str(n) for n in range(200)]


async def test_waiting_messages_counts_the_open_bubbles_of_one_chat(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = OutboxStore(engine)
    sid, other = await _stream(writer, "w1"), await _stream(writer, "w2")
    assert await store.waiting_messages(sid) == 0 and await store.open_count() == 0
    queued = await store.enqueue(
        1,
        sid,
        [_bubble("一"), _bubble("二"), _bubble("三"), NewItem("poke", {"user_id": "42"})],
        T0,
    )
    await store.enqueue(1, other, [_bubble("别处")], T0)
    await store.mark(queued.ids[0], OutboxStatus.SENT, T0)
    await store.mark(queued.ids[1], OutboxStatus.SENDING, T0)
    assert await store.waiting_messages(sid) == 2  # sending and pending; not sent, not the poke
    assert await store.waiting_messages(other) == 1
    assert await store.open_count() == 4


async def test_interrupted_rows_are_those_being_sent_in_order(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = OutboxStore(engine)
    first, second = await _stream(writer, "i1"), await _stream(writer, "i2")
    # The later chat's rows come first: the order is the rows', not the chats'.
    later_chat = await store.enqueue(1, second, [_bubble(str(n)) for n in range(4)], T0)
    earlier_chat = await store.enqueue(1, first, [_bubble("x")], T0)
    for row_id in (*earlier_chat.ids, *reversed(later_chat.ids[1:])):
        await store.mark(row_id, OutboxStatus.SENDING, T0)
    await store.mark(later_chat.ids[2], OutboxStatus.SENT, T0)
    rows = await store.interrupted()
    assert [(row.id, row.status) for row in rows] == [
        (later_chat.ids[1], "sending"),
        (later_chat.ids[3], "sending"),
        (earlier_chat.ids[0], "sending"),
    ]
    assert [row.stream for row in rows] == [group("i2"), group("i2"), group("i1")]


# --- marking -----------------------------------------------------------------------------


async def test_mark_sets_one_row_and_cuts_a_long_error(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = OutboxStore(engine)
    sid = await _stream(writer, "mk")
    queued = await store.enqueue(1, sid, [_bubble("一"), _bubble("二")], T0)
    later = T0 + timedelta(seconds=30)
    error = "连接断开" + "x" * 500
    await store.mark(
        queued.ids[0], OutboxStatus.PENDING, later, attempts=3, last_error=RuntimeError(error)
    )
    first, second = await _rows(engine)
    assert (first.status, first.updated_at, first.attempts) == ("pending", later, 3)
    assert first.last_error == error[:MAX_ERROR_CHARS] and MAX_ERROR_CHARS == 300
    assert (second.updated_at, second.attempts, second.last_error) == (T0, 0, "")
    await store.mark(queued.ids[1], OutboxStatus.SENT, later, platform_message_id="p-1")
    _, second = await _rows(engine)
    assert (second.status, second.platform_message_id, second.last_error) == ("sent", "p-1", "")


async def test_mark_sending_and_mark_sent_settle_many_rows_in_one_call(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = OutboxStore(engine)
    a, b = await _stream(writer, "ms-a"), await _stream(writer, "ms-b")
    first = await store.enqueue(1, a, [_bubble("一"), _bubble("二")], T0)
    other = await store.enqueue(2, b, [_bubble("三")], T0)
    began, done = T0 + timedelta(seconds=5), T0 + timedelta(seconds=6)
    await store.mark_sending([first.ids[0], other.ids[0]], began)
    sending = {r.id: (r.status, r.updated_at) for r in await _rows(engine)}
    assert sending == {
        first.ids[0]: ("sending", began),
        first.ids[1]: ("pending", T0),
        other.ids[0]: ("sending", began),
    }
    await store.mark_sent([(first.ids[0], "p-a"), (other.ids[0], "p-b")], done)
    settled = {r.id: (r.status, r.platform_message_id, r.updated_at) for r in await _rows(engine)}
    assert settled == {
        first.ids[0]: ("sent", "p-a", done),
        first.ids[1]: ("pending", None, T0),
        other.ids[0]: ("sent", "p-b", done),
    }
    assert [head.id for head in await store.heads()] == [first.ids[1]]


async def test_heads_skip_settled_rows_and_deep_backlogs_alike(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    # Interleaved chats, settled rows before and between the open ones, one chat all settled.
    store = OutboxStore(engine)
    chats = [await _stream(writer, f"deep-{n}") for n in range(5)]
    ids: dict[int, list[int]] = {chat: [] for chat in chats}
    for round_no in range(30):
        for chat in chats:
            queued = await store.enqueue(round_no, chat, [_bubble(f"{chat}-{round_no}")], T0)
            ids[chat] += queued.ids
    settled = {chat: 3 * n for n, chat in enumerate(chats[:4])} | {chats[4]: 30}
    for chat, count in settled.items():
        await _set_status(engine, OutboxStatus.SENT, *ids[chat][:count])
    heads = await store.heads()
    expected = sorted(ids[chat][count] for chat, count in settled.items() if count < 30)
    assert [head.id for head in heads] == expected
    assert [head.id for head in await store.heads(limit=2)] == expected[:2]


# --- echo matching -----------------------------------------------------------------------


async def _said(
    engine: AsyncEngine,
    writer: TimelineWriter,
    stream: str,
    text: str,
    at: datetime,
    *,
    platform_id: str | None = None,
    from_bot: bool = True,
) -> str:
    """A message in the timeline stored at `at` (the writer stamps now; set it after)."""
    platform_id = platform_id or f"echo-{next(_platform_ids)}"
    msg = own_message(group(stream), (Segment(SegmentKind.TEXT, text=text),), platform_id, at)
    if not from_bot:
        msg = replace(msg, sender=Sender(user_id="42"), from_bot=False)
    written = await writer.write(msg)
    async with engine.begin() as conn:
        await conn.execute(
            update(Message)
            .where(Message.id == written.message_id)  # type: ignore[union-attr]
            .values(stored_at=at)
        )
    return platform_id


SINCE = T0 + timedelta(minutes=1)


@pytest.mark.parametrize(
    ("offset_s", "from_bot", "text", "found"),
    [
        pytest.param(0, True, "好的", True, id="stored exactly at since counts"),
        pytest.param(5, True, "好的", True, id="stored after since"),
        pytest.param(-1, True, "好的", False, id="stored before since"),
        pytest.param(5, False, "好的", False, id="a member said it"),
        pytest.param(5, True, "好的呀", False, id="other words"),
    ],
)
async def test_an_echo_is_the_bots_own_words_stored_since_the_send(
    engine: AsyncEngine,
    writer: TimelineWriter,
    offset_s: float,
    from_bot: bool,
    text: str,
    found: bool,
) -> None:
    sid = await _stream(writer, "e1")
    said = await _said(
        engine, writer, "e1", text, SINCE + timedelta(seconds=offset_s), from_bot=from_bot
    )
    echo = await OutboxStore(engine).unclaimed_echo(sid, "好的", SINCE)
    assert echo == (said if found else None)


async def test_an_echo_in_another_chat_never_counts(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    sid = await _stream(writer, "e2")
    await _stream(writer, "e2-other")
    await _said(engine, writer, "e2-other", "好的", SINCE)
    assert await OutboxStore(engine).unclaimed_echo(sid, "好的", SINCE) is None


async def test_the_oldest_unclaimed_echo_is_taken(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = OutboxStore(engine)
    sid = await _stream(writer, "e3")
    # Platform ids sort the other way round from arrival: the order is the timeline's.
    claimed = await _said(engine, writer, "e3", "哈", SINCE, platform_id="z-first")
    oldest = await _said(engine, writer, "e3", "哈", SINCE, platform_id="y-second")
    await _said(engine, writer, "e3", "哈", SINCE, platform_id="x-third")
    queued = await store.enqueue(1, sid, [_bubble("哈"), _bubble("哈")], T0)
    await store.mark(queued.ids[0], OutboxStatus.SENT, SINCE, platform_message_id=claimed)
    # The row being resolved has no platform id yet: it must not hide every echo.
    await store.mark(queued.ids[1], OutboxStatus.SENDING, SINCE)
    assert await store.unclaimed_echo(sid, "哈", SINCE) == oldest


async def test_a_claim_in_another_chat_does_not_hide_this_chats_echo(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    # Platform message ids are only unique within a chat.
    store = OutboxStore(engine)
    sid, other = await _stream(writer, "e4"), await _stream(writer, "e4-other")
    echo = await _said(engine, writer, "e4", "好的", SINCE, platform_id="shared-7")
    queued = await store.enqueue(1, other, [_bubble("好的")], T0)
    await store.mark(queued.ids[0], OutboxStatus.SENT, SINCE, platform_message_id="shared-7")
    assert await store.unclaimed_echo(sid, "好的", SINCE) == echo
    queued = await store.enqueue(1, sid, [_bubble("好的")], T0)
    await store.mark(queued.ids[0], OutboxStatus.SENT, SINCE, platform_message_id="shared-7")
    assert await store.unclaimed_echo(sid, "好的", SINCE) is None


async def test_a_row_is_taken_for_sending_by_one_process_only(
    engine: AsyncEngine, writer: TimelineWriter, migrated_url: str
) -> None:
    """Two processes sharing the store see the same pending row: one takes it."""
    other_process = create_engine(migrated_url)
    try:
        mine, theirs = OutboxStore(engine), OutboxStore(other_process)
        queued = await mine.enqueue(1, await _stream(writer, "two"), [_bubble("一")], T0)
        taken = await asyncio.gather(mine.mark_sending(queued.ids, T0),
                                     theirs.mark_sending(queued.ids, T0))  # fmt: skip
        assert sorted(len(t) for t in taken) == [0, 1]
        assert await mine.mark_sending(queued.ids, T0) == []  # sending already: not again
    finally:
        await other_process.dispose()
