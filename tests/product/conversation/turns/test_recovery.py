"""Start-up recovery on a real store: every message the gate let through ends in exactly one
recorded outcome, wherever a crash cut its path (pallas/product/conversation/turns/recovery.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import update

from pallas.app import Runtime
from pallas.config import load_settings
from pallas.core.inbound import InboundMessage
from pallas.product.conversation.turns.recovery import (
    RecoveryDeps,
    RecoveryReport,
    recover_kernel,
    worth_retrying,
)
from pallas.product.conversation.turns.turn import Turn, TurnDecision
from pallas.store.ledger import LedgerEvent
from pallas.store.models import Message
from pallas.store.outbox import NewItem
from pallas.store.timeline import utc_now
from tests.product.conversation.turns.test_kernel import (
    Recorder,
    events,
    say,
    settle,
    start_runtime,
)
from tests.support.inbound import BOT_ID, group, message, private
from tests.support.waiting import until


async def crash(runtime: Runtime) -> None:
    """Stop like a killed process would: nothing in flight gets to finish, and nothing of
    it goes on running (its sends and jobs would write to the closed writers later, into
    another test's log)."""
    runtime.lease.halt()  # its lease is left to expire, as a killed process's is
    await runtime.jobs.stop()
    await runtime.delivery.dispatcher.stop()
    await runtime.conversation.turn_buffers.stop(grace_s=0)
    await runtime.recorders.timeline.close()
    await runtime.recorders.ledger.close()
    await runtime.engine.dispose()


async def stuck_turn(tmp_path: Path, url: str, msg: InboundMessage) -> tuple[Runtime, Turn, int]:
    """A runtime whose turn for `msg` started and never ended."""
    recorder = Recorder()
    recorder.block = asyncio.Event()
    runtime = await start_runtime(tmp_path, url, recorder)
    message_id = await say(runtime, msg)
    await until(lambda: recorder.turns)
    await runtime.recorders.ledger.flush()
    return runtime, recorder.turns[0], message_id


async def restart(tmp_path: Path, url: str, *, blocked: bool = False) -> tuple[Runtime, Recorder]:
    """A new start on the store; `blocked`: its turns hang in the handler (set before the
    start, which may already run the turn recovery re-buffered)."""
    recorder = Recorder()
    if blocked:
        recorder.block = asyncio.Event()
    return await start_runtime(tmp_path, url, recorder), recorder


@contextlib.asynccontextmanager
async def crashed_and_restarted(
    runtime: Runtime, tmp_path: Path, url: str
) -> AsyncIterator[tuple[Runtime, Recorder]]:
    """Kill `runtime`, start again on its store, and stop that one after the block."""
    await crash(runtime)
    again, recorder = await restart(tmp_path, url)
    try:
        yield again, recorder
    finally:
        await again.stop()


async def test_a_cut_off_direct_call_runs_once_more_then_is_given_up(
    tmp_path: Path, store_url: str
) -> None:
    msg = message("@牛牛 在吗", stream=group("r1"), mentions=(BOT_ID,))
    runtime, cut, message_id = await stuck_turn(tmp_path, store_url, msg)
    await crash(runtime)
    second, recorder = await restart(tmp_path, store_url, blocked=True)  # the retry is cut too
    await until(lambda: recorder.turns)
    assert [m.message_id for m in recorder.turns[0].messages] == [message_id]
    await second.recorders.ledger.flush()
    await crash(second)
    third, last = await restart(tmp_path, store_url)
    try:
        await settle(third)
        assert last.turns == []  # retried once, never twice
        ends = await events(third.engine, "turn_interrupted")
        assert [(e.turn_id, e.reason) for e in ends] == [
            (cut.turn_id, "retry"),
            (recorder.turns[0].turn_id, "given_up"),
        ]
        assert all(e.payload["message_ids"] == [message_id] for e in ends)
    finally:
        await third.stop()


async def test_a_cut_off_unsolicited_turn_is_given_up(tmp_path: Path, store_url: str) -> None:
    recorder = Recorder()
    recorder.block = asyncio.Event()
    runtime = await start_runtime(tmp_path, store_url, recorder)
    stream = group("r2")
    await say(runtime, message("我说过话", stream=stream, user_id=BOT_ID, from_bot=True))
    chatter = await say(runtime, message("接着聊", stream=stream, user_id="7"))  # the window
    await until(lambda: recorder.turns)
    cut = recorder.turns[0]
    assert not cut.disposition.is_direct_call
    await runtime.recorders.ledger.flush()
    async with crashed_and_restarted(runtime, tmp_path, store_url) as (again, second):
        await settle(again)
        assert second.turns == []
        ends = await events(again.engine, "turn_interrupted")
        assert [(e.turn_id, e.reason, e.payload["message_ids"]) for e in ends] == [
            (cut.turn_id, "given_up", [chatter])
        ]


async def test_a_turn_whose_reply_was_queued_is_finished_not_rerun(
    tmp_path: Path, store_url: str
) -> None:
    msg = message("@牛牛 讲个笑话", stream=group("r3"), mentions=(BOT_ID,))
    runtime, cut, _ = await stuck_turn(tmp_path, store_url, msg)
    # The reply was committed with its outbox rows; the turn's ending was not.
    await runtime.delivery.outbox.enqueue(
        cut.turn_id,
        cut.stream_id,
        [NewItem("message", {"text": "从前有座山"})],
        datetime.now(UTC),
        bubbles=("从前有座山",),
    )
    async with crashed_and_restarted(runtime, tmp_path, store_url) as (again, recorder):
        await settle(again)
        assert recorder.turns == []
        finished = await events(again.engine, "turn_finished")
        assert [(e.turn_id, e.reason, e.payload["recovered"]) for e in finished] == [
            (cut.turn_id, "done", True)
        ]
        assert await events(again.engine, "turn_interrupted") == []


async def test_a_turn_that_chose_silence_is_closed_silent(tmp_path: Path, store_url: str) -> None:
    msg = message("@牛牛 别说话", stream=group("r4"), mentions=(BOT_ID,))
    runtime, cut, _ = await stuck_turn(tmp_path, store_url, msg)
    await runtime.recorders.ledger.write(
        LedgerEvent("agent_decided", cut.stream_id, reason="silent", turn_id=cut.turn_id)
    )
    async with crashed_and_restarted(runtime, tmp_path, store_url) as (again, recorder):
        await settle(again)
        assert recorder.turns == []
        finished = await events(again.engine, "turn_finished")
        assert [(e.turn_id, e.reason) for e in finished] == [(cut.turn_id, "silent")]


async def test_a_message_stored_without_its_gate_decision_is_gated_at_start_up(
    tmp_path: Path, store_url: str
) -> None:
    recorder = Recorder()
    runtime = await start_runtime(tmp_path, store_url, recorder)
    # Committed, then the process stopped before the gate's event: no next stage ran.
    fresh = await runtime.recorders.timeline.write(
        message("@牛牛 还在吗", stream=group("r5"), mentions=(BOT_ID,))
    )
    old = await runtime.recorders.timeline.write(
        message("@牛牛 老消息", stream=group("r6"), mentions=(BOT_ID,))
    )
    async with runtime.engine.begin() as conn:
        await conn.execute(
            update(Message)
            .where(Message.id == old.message_id)  # type: ignore[union-attr]
            .values(stored_at=datetime.now(UTC) - timedelta(minutes=30))
        )
    async with crashed_and_restarted(runtime, tmp_path, store_url) as (again, second):
        await until(lambda: second.turns)
        await settle(again)
        assert [[m.message_id for m in t.messages] for t in second.turns] == [
            [fresh.message_id]  # type: ignore[union-attr]
        ]
        passed = await events(again.engine, "gate_passed")
        assert [e.message_id for e in passed] == [fresh.message_id]  # type: ignore[union-attr]
        dropped = await events(again.engine, "gate_dropped")
        assert [(e.message_id, e.reason) for e in dropped] == [
            (old.message_id, "stale_at_restart")  # type: ignore[union-attr]
        ]


async def test_a_turn_cut_while_giving_its_batch_back_waits(tmp_path: Path, store_url: str) -> None:
    recorder = Recorder()
    recorder.decide = lambda turn: TurnDecision.WAIT
    runtime = await start_runtime(tmp_path, store_url, recorder)
    stream = private("77")
    first = await say(runtime, message("在吗", stream=stream, user_id="77"))
    await until(lambda: recorder.turns)
    await settle(runtime)
    async with crashed_and_restarted(runtime, tmp_path, store_url) as (again, second):
        await until(lambda: second.turns)
        assert [m.message_id for m in second.turns[0].messages] == [first]
        assert await events(again.engine, "turn_interrupted") == []


NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=2)


def test_a_cut_off_batch_is_worth_retrying_while_its_newest_message_is_fresh() -> None:
    assert worth_retrying(NOW - timedelta(seconds=30), NOW, WINDOW)
    assert worth_retrying(NOW - WINDOW, NOW, WINDOW)
    assert not worth_retrying(NOW - WINDOW - timedelta(seconds=1), NOW, WINDOW)
    assert not worth_retrying(None, NOW, WINDOW)


async def recover_then_die(tmp_path: Path, url: str) -> RecoveryReport:
    """A start that gets through recovery (its marks committed, its re-buffered batches in
    memory) and is killed before the turn buffers start any turn."""
    settings = load_settings(env_file=None, pallas_data_dir=tmp_path, pallas_database_url=url)
    runtime = Runtime.build(settings, handler=Recorder())
    runtime.recorders.ledger.start()
    report = await recover_kernel(
        RecoveryDeps(
            engine=runtime.engine,
            ledger=runtime.recorders.ledger,
            turn_buffers=runtime.conversation.turn_buffers,
            gate=runtime.conversation.stages,
            window=runtime.conversation.rebuffer_window,
            clock=utc_now,
        )
    )
    await crash(runtime)
    return report


async def marked_and_killed(tmp_path: Path, url: str, msg: InboundMessage) -> tuple[Turn, int]:
    """A turn for `msg` cut off, then a start killed between its retry mark and the retry."""
    runtime, cut, message_id = await stuck_turn(tmp_path, url, msg)
    await crash(runtime)
    report = await recover_then_die(tmp_path, url)
    assert (report.retried, report.owed_retries) == (1, 1)
    return cut, message_id


async def test_a_retry_the_process_died_before_runs_at_the_next_start_once(
    tmp_path: Path, store_url: str
) -> None:
    msg = message("@牛牛 还在吗", stream=group("r7"), mentions=(BOT_ID,))
    cut, message_id = await marked_and_killed(tmp_path, store_url, msg)
    third, recorder = await restart(tmp_path, store_url)
    try:
        await until(lambda: recorder.turns)
        await settle(third)
        assert [[m.message_id for m in t.messages] for t in recorder.turns] == [[message_id]]
        finished = await events(third.engine, "turn_finished")
        assert [e.turn_id for e in finished] == [recorder.turns[0].turn_id]
    finally:
        await third.stop()
    fourth, again = await restart(tmp_path, store_url)
    try:
        await settle(fourth)
        assert again.turns == []  # the retry ran: nothing is owed any more
        ends = await events(fourth.engine, "turn_interrupted")
        assert [(e.turn_id, e.reason) for e in ends] == [(cut.turn_id, "retry")]
    finally:
        await fourth.stop()


async def test_a_retry_owed_too_long_is_given_up_once(tmp_path: Path, store_url: str) -> None:
    msg = message("@牛牛 人呢", stream=group("r8"), mentions=(BOT_ID,))
    cut, message_id = await marked_and_killed(tmp_path, store_url, msg)
    settings = load_settings(env_file=None, pallas_data_dir=tmp_path, pallas_database_url=store_url)
    down = Runtime.build(settings, handler=Recorder())
    async with down.engine.begin() as conn:  # the bot stayed down: the @ is old now
        old = datetime.now(UTC) - timedelta(minutes=10)
        await conn.execute(update(Message).where(Message.id == message_id).values(stored_at=old))
    await down.engine.dispose()
    for _ in range(2):  # and a start after that one adds nothing
        again, recorder = await restart(tmp_path, store_url)
        try:
            await settle(again)
            assert recorder.turns == []
            ends = await events(again.engine, "turn_interrupted")
            assert [(e.turn_id, e.message_id, e.reason) for e in ends] == [
                (cut.turn_id, message_id, "retry"),
                (None, message_id, "given_up"),
            ]
            assert ends[1].payload["retry_of"] == cut.turn_id
            assert await events(again.engine, "gate_dropped") == []
        finally:
            await again.stop()
