"""The kernel end to end in-process: ingress -> gate -> buffer -> turn, on a real database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.app import Runtime
from pallas.config import load_settings
from pallas.core.inbound import InboundMessage
from pallas.product.conversation.gate.gate import Outcome, Reason, Signal
from pallas.product.conversation.gate.trigger import SpeakTrigger
from pallas.product.conversation.turns.turn import Turn, TurnDecision
from pallas.store.models import Event, Message, StreamState
from pallas.store.outbox import NewItem
from tests.support.inbound import BOT_ID, group, message, private
from tests.support.waiting import until

Decide = Callable[[Turn], TurnDecision]


class Recorder:
    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.decide: Decide = lambda turn: TurnDecision.DONE
        self.block: asyncio.Event | None = None

    async def handle(self, turn: Turn) -> TurnDecision:
        self.turns.append(turn)
        if self.block is not None:
            await self.block.wait()
        return self.decide(turn)


async def start_runtime(tmp_path: Path, url: str, recorder: Recorder) -> Runtime:
    # A short process lease: a restart after a crash on PostgreSQL watches its namesake for
    # one renewal period (docs/scaling.md).
    settings = load_settings(
        env_file=None, pallas_data_dir=tmp_path, pallas_database_url=url,
        pallas_process_lease_s=3,
    )  # fmt: skip
    runtime = Runtime.build(settings, handler=recorder)
    await runtime.start()
    return runtime


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def runtime(tmp_path: Path, store_url: str, recorder: Recorder) -> AsyncIterator[Runtime]:
    runtime = await start_runtime(tmp_path, store_url, recorder)
    yield runtime
    await runtime.stop()


async def settle(runtime: Runtime) -> None:
    """Let every turn that may start now run to its end, then let the ledger commit what it
    queued. A message the gate passed waits in its buffer until the buffers' loop next runs,
    and "no turn running" holds before that turn has begun: a tick here starts at once what
    the loop would start (a batch given back stays held, as it would)."""
    buffers = runtime.conversation.turn_buffers
    buffers.tick()
    while buffers.running:
        await until(lambda: not buffers.running)
        buffers.tick()
    await runtime.recorders.ledger.flush()


async def events(engine: AsyncEngine, kind: str) -> list[Event]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(Event).where(Event.kind == kind).order_by(Event.id))
        return list(rows.all())


async def say(runtime: Runtime, msg: InboundMessage) -> int:
    result = await runtime.conversation.ingress.accept(msg)
    assert result.stored is not None
    return result.stored.message_id


async def test_plain_group_chatter_is_seen_not_answered(
    runtime: Runtime, recorder: Recorder
) -> None:
    mid = await say(runtime, message("今天吃什么", stream=group("g1")))
    await settle(runtime)
    assert recorder.turns == []
    dropped = await events(runtime.engine, "gate_dropped")
    assert [(e.message_id, e.reason, e.turn_id) for e in dropped] == [
        (mid, "attention_filtered", None)
    ]
    async with runtime.engine.connect() as conn:
        assert (await conn.execute(select(Message.text).where(Message.id == mid))).scalar() == (
            "今天吃什么"
        )


@pytest.mark.parametrize(
    ("msg", "reason", "trigger"),
    [
        (message("在吗", stream=private("42")), Reason.DIRECT_CONVERSATION, SpeakTrigger.TO_ME),
        (
            message("@bot 看看", stream=group("g2"), mentions=(BOT_ID,)),
            Reason.MENTIONED,
            SpeakTrigger.TO_ME,
        ),
        (message("牛牛，在吗", stream=group("g3")), Reason.ATTENTION, SpeakTrigger.ALIAS),
        (message("我觉得牛牛说得对", stream=group("g4")), Reason.ATTENTION, SpeakTrigger.MENTION),
        (
            message("有人知道这个怎么弄吗", stream=group("g5")),
            Reason.ATTENTION,
            SpeakTrigger.AMBIENT,
        ),
    ],
)
async def test_called_messages_get_a_turn(
    runtime: Runtime,
    recorder: Recorder,
    msg: InboundMessage,
    reason: Reason,
    trigger: SpeakTrigger,
) -> None:
    mid = await say(runtime, msg)
    await until(lambda: recorder.turns)
    turn = recorder.turns[0]
    assert turn.disposition.reason is reason
    assert turn.trigger is trigger
    assert turn.timeline_size == (4 if trigger is SpeakTrigger.AMBIENT else 8)
    assert [m.message_id for m in turn.messages] == [mid]
    await settle(runtime)
    async with runtime.engine.connect() as conn:
        consumed = (await conn.execute(select(Message.turn_id).where(Message.id == mid))).scalar()
    assert consumed == turn.turn_id
    started = await events(runtime.engine, "turn_started")
    assert started[0].turn_id == turn.turn_id and started[0].payload["trigger"] == trigger.value


async def test_reply_to_the_bot_is_a_direct_call(runtime: Runtime, recorder: Recorder) -> None:
    stream = group("g6")
    await say(
        runtime,
        message(
            "我是机器人说的",
            stream=stream,
            user_id=BOT_ID,
            from_bot=True,
            platform_message_id="bot-1",
        ),
    )
    recorder.decide = lambda turn: TurnDecision.DONE
    await say(runtime, message("你说得不对", stream=stream, reply_to="bot-1"))
    await until(lambda: recorder.turns)
    assert Signal.REPLIED_TO_ME in recorder.turns[0].disposition.signals
    assert recorder.turns[0].trigger is SpeakTrigger.TO_ME


async def test_poke_flood_counts_at_arrival(runtime: Runtime, recorder: Recorder) -> None:
    stream = group("g7")
    for _ in range(5):
        await say(
            runtime, message("[戳一戳 → 10000]", stream=stream, is_poke=True, mentions=(BOT_ID,))
        )
    await settle(runtime)
    passed = await events(runtime.engine, "gate_passed")
    flooded = [e for e in await events(runtime.engine, "gate_dropped") if e.reason == "poke_flood"]
    assert (len(passed), len(flooded)) == (3, 2)
    assert [e.payload["facts"]["pokes_in_window"] for e in passed] == [1, 2, 3]


async def test_silence_closes_the_natural_window_until_the_bot_speaks(
    runtime: Runtime, recorder: Recorder
) -> None:
    stream = group("g8")
    await say(runtime, message("机器人说话了", stream=stream, user_id=BOT_ID, from_bot=True))
    recorder.decide = lambda turn: TurnDecision.SILENT
    await say(runtime, message("接一句", stream=stream, user_id="7"))
    await until(lambda: recorder.turns)
    assert Signal.NATURAL_WINDOW in recorder.turns[0].disposition.signals
    await settle(runtime)
    await say(runtime, message("再接一句", stream=stream, user_id="8"))
    await settle(runtime)
    assert len(recorder.turns) == 1
    dropped = await events(runtime.engine, "gate_dropped")
    assert dropped[-1].reason == "attention_filtered"
    async with runtime.engine.connect() as conn:
        declined = (await conn.execute(select(StreamState.follow_up_declined))).scalar()
    assert declined is True
    await say(runtime, message("机器人又说话了", stream=stream, user_id=BOT_ID, from_bot=True))
    await say(runtime, message("第三句", stream=stream, user_id="9"))
    await until(lambda: len(recorder.turns) == 2)


async def test_group_overrides_quiet_hours_and_cap(runtime: Runtime, recorder: Recorder) -> None:
    stream = group("g9")
    first = await runtime.conversation.ingress.accept(message("建群", stream=stream))
    assert first.stored is not None
    now_local = datetime.now(UTC).astimezone(ZoneInfo("Asia/Shanghai"))
    around_now = (
        f"{(now_local - timedelta(hours=1)):%H:%M}-{(now_local + timedelta(hours=1)):%H:%M}"
    )
    await runtime.conversation.policies.save(
        first.stored.stream_id, {"quiet_hours": [around_now]}, datetime.now(UTC)
    )
    await say(runtime, message("牛牛在吗", stream=stream))
    await say(runtime, message("@牛牛", stream=stream, mentions=(BOT_ID,)))
    await until(lambda: recorder.turns)
    await settle(runtime)
    reasons = [e.reason for e in await events(runtime.engine, "gate_dropped")]
    assert reasons[-1] == "asleep"
    assert recorder.turns[0].disposition.reason is Reason.MENTIONED  # @ wakes it anyway
    with pytest.raises(ValueError):
        await runtime.conversation.policies.save(
            first.stored.stream_id, {"max_replies_in_window": -1}, datetime.now(UTC)
        )


async def test_frequency_cap_never_swallows_a_name_call(
    runtime: Runtime, recorder: Recorder
) -> None:
    stream = group("g10")
    first = await runtime.conversation.ingress.accept(message("开始", stream=stream))
    assert first.stored is not None
    await runtime.conversation.policies.save(
        first.stored.stream_id, {"max_replies_in_window": 1}, datetime.now(UTC)
    )
    await say(runtime, message("我说了", stream=stream, user_id=BOT_ID, from_bot=True))
    await say(runtime, message("顺着聊", stream=stream, user_id="7"))
    await settle(runtime)
    assert recorder.turns == []
    assert (await events(runtime.engine, "gate_dropped"))[-1].reason == "frequency_cap"
    await say(runtime, message("牛牛你说呢", stream=stream, user_id="7"))
    await until(lambda: recorder.turns)


async def test_the_frequency_cap_counts_replies_queued_but_not_yet_sent(
    runtime: Runtime, recorder: Recorder
) -> None:
    stream = group("g11")
    first = await runtime.conversation.ingress.accept(message("开始", stream=stream))
    assert first.stored is not None
    sid = first.stored.stream_id
    await runtime.conversation.policies.save(sid, {"max_replies_in_window": 2}, datetime.now(UTC))
    await say(runtime, message("我说了", stream=stream, user_id=BOT_ID, from_bot=True))
    # No NapCat is connected: this reply waits in the outbox, not yet a fact in the timeline.
    await runtime.delivery.outbox.enqueue(
        None, sid, [NewItem("message", {"text": "还没发"})], datetime.now(UTC), bubbles=("还没发",)
    )
    await say(runtime, message("顺着聊", stream=stream, user_id="7"))  # the natural window
    await settle(runtime)
    assert recorder.turns == []
    dropped = (await events(runtime.engine, "gate_dropped"))[-1]
    assert (dropped.reason, dropped.payload["stage"]) == ("frequency_cap", "batch")


async def test_a_failing_handler_ends_only_its_turn(runtime: Runtime, recorder: Recorder) -> None:
    def explode(turn: Turn) -> TurnDecision:
        raise RuntimeError("handler broke")

    recorder.decide = explode
    stream = private("77")
    await say(runtime, message("第一句", stream=stream, user_id="77"))
    await until(lambda: len(recorder.turns) == 1)
    await settle(runtime)
    recorder.decide = lambda turn: TurnDecision.DONE
    await say(runtime, message("第二句", stream=stream, user_id="77"))
    await until(lambda: len(recorder.turns) == 2)
    await settle(runtime)
    failed = await events(runtime.engine, "turn_failed")
    assert [e.reason for e in failed] == ["RuntimeError"]
    assert failed[0].turn_id == recorder.turns[0].turn_id


async def test_restart_rebuffers_fresh_waiting_messages_and_keeps_turn_ids_rising(
    tmp_path: Path, store_url: str
) -> None:
    first = Recorder()
    first.block = asyncio.Event()  # the first turn never finishes before the "crash"
    runtime = await start_runtime(tmp_path, store_url, first)
    stream = private("88")
    cut_off = await say(runtime, message("一", stream=stream, user_id="88"))
    await until(lambda: first.turns)
    waiting = [await say(runtime, message(t, stream=stream, user_id="88")) for t in ("二", "三")]
    stale = await say(runtime, message("四", stream=group("g11"), user_id="89", mentions=(BOT_ID,)))
    await until(lambda: len(first.turns) == 2)  # the group @ got its own turn
    await runtime.recorders.ledger.flush()
    async with runtime.engine.begin() as conn:  # make the group message old, and unconsumed
        await conn.execute(
            update(Message)
            .where(Message.id == stale)
            .values(turn_id=None, stored_at=datetime.now(UTC) - timedelta(minutes=10))
        )
    runtime.lease.halt()  # a crash: the lease is left to expire
    await runtime.conversation.turn_buffers.stop(grace_s=0)
    await runtime.recorders.timeline.close()
    await runtime.recorders.ledger.close()
    await runtime.engine.dispose()
    last_turn = max(t.turn_id for t in first.turns)

    second = Recorder()
    restarted = await start_runtime(tmp_path, store_url, second)
    try:
        await until(lambda: second.turns)
        # The cut-off private turn was a direct call: it runs once more, with what waited.
        assert [m.message_id for m in second.turns[0].messages] == [cut_off, *waiting]
        assert second.turns[0].turn_id > last_turn
        await settle(restarted)
        assert all(stale not in [m.message_id for m in t.messages] for t in second.turns)
        interrupted = await events(restarted.engine, "turn_interrupted")
        # The group @'s message is too old to answer now: its cut-off turn is not retried.
        assert sorted(e.reason for e in interrupted) == ["given_up", "retry"]
        dropped = await events(restarted.engine, "gate_dropped")
        assert [(e.message_id, e.reason) for e in dropped] == [(stale, "stale_at_restart")]
    finally:
        await restarted.stop()


async def test_ingress_gate_decisions_name_their_outcome(runtime: Runtime) -> None:
    await say(runtime, message("牛牛", stream=group("g12")))
    await settle(runtime)
    passed = await events(runtime.engine, "gate_passed")
    assert passed[0].payload["outcome"] == Outcome.DELIBERATE.value
    assert passed[0].payload["signals"] == ["called_by_name"]
    assert passed[0].turn_id is None


async def test_a_rebuffered_group_batch_is_judged_on_the_stored_view(
    tmp_path: Path, store_url: str
) -> None:
    first = Recorder()
    first.block = asyncio.Event()
    runtime = await start_runtime(tmp_path, store_url, first)
    stream = group("g13")
    called = await say(runtime, message("牛牛在吗", stream=stream, user_id="1"))
    await until(lambda: first.turns)  # the stream is busy with this turn
    await say(runtime, message("我是机器人", stream=stream, user_id=BOT_ID, from_bot=True))
    waiting = await say(runtime, message("接一句", stream=stream, user_id="2"))
    await runtime.recorders.ledger.flush()
    runtime.lease.halt()  # a crash: the lease is left to expire
    await runtime.conversation.turn_buffers.stop(grace_s=0)
    await runtime.recorders.timeline.close()
    await runtime.recorders.ledger.close()
    await runtime.engine.dispose()

    second = Recorder()
    restarted = await start_runtime(tmp_path, store_url, second)  # an empty activity cache
    try:
        # The name call's cut-off turn runs once more first; then the waiting message.
        await until(lambda: len(second.turns) == 2)
        retried, turn = second.turns
        assert [m.message_id for m in retried.messages] == [called]
        assert [m.message_id for m in turn.messages] == [waiting]
        assert Signal.NATURAL_WINDOW in turn.disposition.signals
    finally:
        await restarted.stop()
