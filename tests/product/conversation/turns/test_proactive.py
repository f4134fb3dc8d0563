"""Turns the bot starts itself, on a real migrated database: the turn it builds, the trail it
leaves, the claim it takes (a reply turn holding the chat wins), chats it cannot speak in."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKey, StreamKind
from pallas.product.conversation.gate.activity import StreamActivity
from pallas.product.conversation.gate.facts import MessageFacts
from pallas.product.conversation.gate.gate import Disposition, Outcome, Reason, Signal
from pallas.product.conversation.gate.policy import GatePolicy
from pallas.product.conversation.gate.trigger import SpeakTrigger
from pallas.product.conversation.ingress import StoredMessage
from pallas.product.conversation.turns.buffers import Batch, TurnBuffers, TurnSource
from pallas.product.conversation.turns.observers import TurnEnded, TurnEnding, TurnObservers
from pallas.product.conversation.turns.proactive import (
    ProactiveOutcome,
    ProactiveResult,
    ProactiveTurns,
)
from pallas.product.conversation.turns.runner import RunnerDeps, TurnIds, build_turn, hand_over
from pallas.product.conversation.turns.turn import Admitted, Occasion, Turn, TurnDecision
from pallas.store.ledger import LedgerWriter
from pallas.store.models import Event, Stream, StreamState
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import BOT_ID, group, message, private

T0 = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)
FOLLOW_UP = Occasion("private_follow_up", "对方20分钟没再说话", key="persona.follow_up:7")
PROMISE = Occasion("promise_due", "你答应过主人的事", key="persona.promise_due:3:0")


class Recorder:
    """A turn handler that records what it was given and answers as told."""

    def __init__(self, decision: TurnDecision = TurnDecision.DONE) -> None:
        self.turns: list[Turn] = []
        self.decision = decision
        self.during: Callable[[Turn], None] = lambda turn: None

    async def handle(self, turn: Turn) -> TurnDecision:
        self.turns.append(turn)
        self.during(turn)
        return self.decision


class Failing:
    async def handle(self, turn: Turn) -> TurnDecision:
        raise RuntimeError("the model is down")


class Heard:
    name = "heard"

    def __init__(self) -> None:
        self.ended: list[TurnEnded] = []

    async def turn_ended(self, ended: TurnEnded) -> None:
        self.ended.append(ended)


class Kernel:
    """The pieces a proactive turn runs through, built as the runtime builds them."""

    def __init__(self, engine: AsyncEngine, ledger: LedgerWriter, handler: Any) -> None:
        self.activities: dict[int, StreamActivity] = {}
        self.heard = Heard()
        observers = TurnObservers()
        observers.register(self.heard)
        self.runner = RunnerDeps(
            ledger=ledger,
            handler=handler,
            turn_ids=TurnIds(100),
            activity=self._activity,
            policy=self._policy,
            clock=lambda: T0,
            lottery_seed="test",
            observers=observers,
        )
        self.buffers = TurnBuffers(self._no_reply_turns, ledger)
        self.proactive = ProactiveTurns(engine, self.buffers, self.runner)

    async def _activity(self, stream_id: int, self_id: str, now: datetime) -> StreamActivity:
        return self.activities.setdefault(stream_id, StreamActivity())

    async def _policy(self, stream_id: int, now: datetime) -> GatePolicy:
        return GatePolicy()

    @staticmethod
    async def _no_reply_turns(batch: Batch) -> TurnDecision:
        raise AssertionError("the buffers' loop is not started in these tests")


async def said(
    writer: TimelineWriter,
    text: str,
    stream: StreamKey,
    *,
    user: str = "42",
    from_bot: bool = False,
) -> MessageWritten:
    written = await writer.write(
        message(text, stream=stream, user_id=user, time=T0, from_bot=from_bot)
    )
    assert isinstance(written, MessageWritten)
    return written


async def events(engine: AsyncEngine, ledger: LedgerWriter, *kinds: str) -> list[Any]:
    await ledger.flush()
    query = select(Event).where(Event.kind.in_(kinds)).order_by(Event.id)
    async with engine.connect() as conn:
        return list((await conn.execute(query)).all())


async def declined(engine: AsyncEngine, stream_id: int) -> bool | None:
    query = select(StreamState.follow_up_declined).where(StreamState.stream_id == stream_id)
    async with engine.connect() as conn:
        return await conn.scalar(query)


# --- one turn of the bot's own ---------------------------------------------------------------


async def test_a_proactive_turn_runs_once_with_no_messages_and_the_occasion(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> None:
    recorder = Recorder()
    kernel = Kernel(engine, ledger, recorder)
    stream = private("42")
    first = await said(writer, "晚安", stream)
    newest = await said(writer, "晚安呀", stream, user=BOT_ID, from_bot=True)
    sid = first.stream_id

    result = await kernel.proactive.start(sid, FOLLOW_UP)

    assert result == ProactiveResult(ProactiveOutcome.RAN, TurnDecision.DONE, 101)
    [turn] = recorder.turns
    assert (turn.turn_id, turn.stream_id, turn.stream) == (101, sid, stream)
    assert turn.messages == () and turn.text == ""
    assert turn.proactive and turn.occasion == FOLLOW_UP
    assert turn.watermark == newest.message_id  # the newest line, the bot's own included
    assert turn.disposition == Disposition(Outcome.DELIBERATE, Reason.PROACTIVE)
    assert turn.facts == MessageFacts()
    assert turn.trigger is SpeakTrigger.AMBIENT and not turn.may_wait

    started, finished = await events(engine, ledger, "turn_started", "turn_finished")
    assert (started.kind, started.reason, started.turn_id) == ("turn_started", "proactive", 101)
    assert (started.stream_id, started.message_id, started.person_id) == (
        sid,
        newest.message_id,
        None,
    )
    assert started.payload["occasion"] == "private_follow_up"
    assert started.payload["key"] == "persona.follow_up:7"
    assert started.payload["message_ids"] == []
    assert (finished.kind, finished.reason, finished.turn_id) == ("turn_finished", "done", 101)
    assert started.id < finished.id


async def test_the_claim_is_the_proactive_one_while_the_turn_runs_and_released_after(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> None:
    recorder = Recorder()
    kernel = Kernel(engine, ledger, recorder)
    sid = (await said(writer, "在吗", private("42"))).stream_id
    seen: list[tuple[frozenset[int], bool]] = []

    def while_running(turn: Turn) -> None:
        # A reply turn arriving now must wait: the chat is held.
        seen.append((kernel.buffers.running, kernel.buffers.try_claim(sid, TurnSource.REPLY)))

    recorder.during = while_running
    result = await kernel.proactive.start(sid, PROMISE)

    assert result.outcome is ProactiveOutcome.RAN
    assert seen == [(frozenset({sid}), False)]
    assert kernel.buffers.running == frozenset()  # released: the next turn may claim it
    [blocked] = await events(engine, ledger, "turn_competition")
    assert blocked.reason == "reply_blocked_by_proactive"
    assert kernel.buffers.try_claim(sid, TurnSource.REPLY)


async def test_each_start_is_a_turn_of_its_own(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> None:
    recorder = Recorder()
    kernel = Kernel(engine, ledger, recorder)
    sid = (await said(writer, "在吗", private("42"))).stream_id
    first = await kernel.proactive.start(sid, FOLLOW_UP)
    second = await kernel.proactive.start(sid, PROMISE)
    assert (first.turn_id, second.turn_id) == (101, 102)
    assert [t.occasion for t in recorder.turns] == [FOLLOW_UP, PROMISE]
    started = await events(engine, ledger, "turn_started")
    assert [(e.turn_id, e.payload["occasion"]) for e in started] == [
        (101, "private_follow_up"),
        (102, "promise_due"),
    ]


async def test_a_chat_a_reply_turn_holds_is_busy_and_the_handler_never_runs(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> None:
    recorder = Recorder()
    kernel = Kernel(engine, ledger, recorder)
    sid = (await said(writer, "在吗", private("42"))).stream_id
    assert kernel.buffers.try_claim(sid, TurnSource.REPLY)

    result = await kernel.proactive.start(sid, FOLLOW_UP)

    assert result == ProactiveResult(ProactiveOutcome.BUSY)
    assert recorder.turns == []
    assert kernel.buffers.running == frozenset({sid})  # the reply turn's claim stands
    assert await events(engine, ledger, "turn_started", "turn_finished") == []
    [blocked] = await events(engine, ledger, "turn_competition")
    assert (blocked.stream_id, blocked.reason) == (sid, "proactive_blocked_by_reply")

    kernel.buffers.release(sid)  # the reply turn ended
    again = await kernel.proactive.start(sid, FOLLOW_UP)
    assert again.outcome is ProactiveOutcome.RAN and len(recorder.turns) == 1
    assert kernel.buffers.running == frozenset()


async def test_an_unknown_chat_is_gone(engine: AsyncEngine, ledger: LedgerWriter) -> None:
    recorder = Recorder()
    kernel = Kernel(engine, ledger, recorder)
    result = await kernel.proactive.start(9_999, FOLLOW_UP)
    assert result == ProactiveResult(ProactiveOutcome.GONE)
    assert recorder.turns == []
    assert kernel.buffers.running == frozenset()  # released even though nothing ran
    assert await events(engine, ledger, "turn_started", "turn_finished") == []


async def test_a_chat_with_nothing_said_is_gone(engine: AsyncEngine, ledger: LedgerWriter) -> None:
    async with engine.begin() as conn:
        row = await conn.execute(
            insert(Stream).values(
                platform="qq", self_id=BOT_ID, kind="private", external_id="42", created_at=T0
            )
        )
        sid = int(row.inserted_primary_key[0])
    recorder = Recorder()
    kernel = Kernel(engine, ledger, recorder)
    result = await kernel.proactive.start(sid, PROMISE)
    assert result.outcome is ProactiveOutcome.GONE
    assert recorder.turns == []
    assert kernel.buffers.running == frozenset()
    assert await events(engine, ledger, "turn_started") == []


async def test_a_failing_handler_still_ends_the_turn_and_releases_the_chat(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> None:
    kernel = Kernel(engine, ledger, Failing())
    sid = (await said(writer, "在吗", private("42"))).stream_id
    result = await kernel.proactive.start(sid, FOLLOW_UP)
    assert result == ProactiveResult(ProactiveOutcome.RAN, TurnDecision.DONE, 101)
    assert kernel.buffers.running == frozenset()
    [failed] = await events(engine, ledger, "turn_failed")
    assert (failed.turn_id, failed.reason) == (101, "RuntimeError")
    await kernel.runner.observers.drain()
    assert [e.ending for e in kernel.heard.ended] == [TurnEnding.FAILED]


async def test_a_turn_of_the_bot_s_own_cannot_wait(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> None:
    """No message to wait on: a wait is taken as done, and nothing is held for later."""
    recorder = Recorder(TurnDecision.WAIT)
    kernel = Kernel(engine, ledger, recorder)
    sid = (await said(writer, "在吗", private("42"))).stream_id
    result = await kernel.proactive.start(sid, FOLLOW_UP)
    assert (result.outcome, result.decision) == (ProactiveOutcome.RAN, TurnDecision.DONE)
    assert await events(engine, ledger, "turn_waiting") == []
    [finished] = await events(engine, ledger, "turn_finished")
    assert finished.reason == "done"
    assert kernel.buffers.running == frozenset() and kernel.buffers.buffered(sid) == 0


# --- what follows the turn -------------------------------------------------------------------


async def test_passing_on_its_own_idea_in_a_group_declines_nobody(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> None:
    recorder = Recorder(TurnDecision.SILENT)
    kernel = Kernel(engine, ledger, recorder)
    chat = group("500")
    written = await said(writer, "@牛牛 明天提醒我", chat, user="7")
    sid = written.stream_id

    result = await kernel.proactive.start(sid, PROMISE)

    assert result.outcome is ProactiveOutcome.RAN and result.decision is TurnDecision.SILENT
    assert kernel.activities[sid].follow_up_declined is False
    [finished] = await events(engine, ledger, "turn_finished")
    assert finished.reason == "silent"
    assert await declined(engine, sid) is None  # no stream state written at all

    # The same silence answering someone's message does decline the exchange.
    disposition = Disposition(Outcome.DELIBERATE, Reason.ATTENTION, frozenset({Signal.MENTIONED}))
    stored = StoredMessage(written.message_id, sid, written.person_id, message(stream=chat))
    batch = Batch(sid, (Admitted(stored, MessageFacts(), disposition),), may_wait=False)
    reply_turn = build_turn(200, batch, disposition)
    assert await hand_over(reply_turn, kernel.activities[sid], kernel.runner) is TurnDecision.SILENT
    assert kernel.activities[sid].follow_up_declined is True
    await ledger.flush()
    assert await declined(engine, sid) is True


async def test_after_turn_observers_hear_the_occasion(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> None:
    recorder = Recorder(TurnDecision.SILENT)
    kernel = Kernel(engine, ledger, recorder)
    stream = private("42")
    sid = (await said(writer, "在吗", stream)).stream_id

    await kernel.proactive.start(sid, FOLLOW_UP)
    recorder.decision = TurnDecision.DONE
    await kernel.proactive.start(sid, PROMISE)
    await kernel.runner.observers.drain()

    assert kernel.heard.ended == [
        TurnEnded(101, sid, stream, (), TurnEnding.SILENT, T0, "private_follow_up"),
        TurnEnded(102, sid, stream, (), TurnEnding.DONE, T0, "promise_due"),
    ]
    assert all(e.stream.kind is StreamKind.PRIVATE for e in kernel.heard.ended)
