"""Which pictures and voices a turn needs understood (pure), and the turn waiting for them a
bounded while, on a real store with a real job worker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import InboundMessage, MediaRef, Segment, SegmentKind
from pallas.core.media import PICTURE_PLACEHOLDER, STICKER_PLACEHOLDER, VOICE_PLACEHOLDER
from pallas.core.text import render_plain_text
from pallas.product.conversation.gate.facts import MessageFacts
from pallas.product.conversation.gate.gate import Disposition, Outcome, Reason, Signal
from pallas.product.conversation.ingress import StoredMessage
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.conversation.turns.buffers import Batch
from pallas.product.conversation.turns.runner import build_turn
from pallas.product.conversation.turns.turn import Admitted, Turn
from pallas.product.media.sight import DESCRIBE_KIND, Arrivals, Sight, SightPlan, plan_sight
from pallas.store.jobs import ClaimedJob, JobStore
from pallas.store.models import Job
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import message

MENTIONED = Disposition(Outcome.FORCE, Reason.MENTIONED, frozenset({Signal.MENTIONED}))
CALLED = Disposition(Outcome.DELIBERATE, Reason.ATTENTION, frozenset({Signal.CALLED_BY_NAME}))
AMBIENT = Disposition(Outcome.DELIBERATE, Reason.AMBIENT)
WINDOW = Disposition(Outcome.DELIBERATE, Reason.ATTENTION, frozenset({Signal.NATURAL_WINDOW}))
WAIT_S = 0.2


def image(text: str = PICTURE_PLACEHOLDER) -> Segment:
    media = MediaRef(url="http://example.invalid/a.png")
    return Segment(SegmentKind.IMAGE, text=text, media=media, raw_type="image")


def voice() -> Segment:
    media = MediaRef(url="http://example.invalid/v.amr")
    return Segment(SegmentKind.RECORD, text=VOICE_PLACEHOLDER, media=media, raw_type="record")


def words(text: str) -> Segment:
    return Segment(SegmentKind.TEXT, text=text)


def said(
    *segments: Segment, reply_to: str | None = None, platform_id: str | None = None
) -> InboundMessage:
    """An inbound message whose text is its segments' rendering, as the platform makes it."""
    base = message(render_plain_text(segments), reply_to=reply_to, platform_message_id=platform_id)
    return replace(base, segments=segments)


_ids = iter(range(100, 10_000))


def held(*segments: Segment, reply_to: str | None = None) -> StoredMessage:
    return StoredMessage(next(_ids), 1, 1, said(*segments, reply_to=reply_to))


def turn_of(*messages: StoredMessage, disposition: Disposition = AMBIENT, turn_id: int = 1) -> Turn:
    """A turn as the runner builds it from a batch."""
    items = tuple(Admitted(m, MessageFacts(), disposition) for m in messages)
    batch = Batch(messages[0].stream_id, items, may_wait=False)
    return build_turn(turn_id, batch, disposition)


def plan(turn: Turn, *, vision: bool = True, voice: bool = True) -> SightPlan:
    return plan_sight(turn, vision=vision, voice=voice)


NOTHING = SightPlan((), False, ())


# The plan (pure).


def test_a_direct_call_with_a_picture_wants_that_message() -> None:
    hello, photo = held(words("@牛牛 你好")), held(image())
    for disposition in (MENTIONED, CALLED):
        assert plan(turn_of(hello, photo, disposition=disposition)) == SightPlan(
            (photo.message_id,), False, ()
        )


def test_a_sticker_in_a_direct_call_is_wanted_too() -> None:
    sticker = held(image(STICKER_PLACEHOLDER))
    assert plan(turn_of(sticker, disposition=MENTIONED)).messages == (sticker.message_id,)


def test_a_picture_nobody_asks_about_is_not_looked_at() -> None:
    photo, chat = held(image()), held(words("哈哈哈"))
    for disposition in (AMBIENT, WINDOW):
        assert plan(turn_of(photo, chat, disposition=disposition)) == NOTHING


def test_a_picture_with_a_caption_nobody_asks_about_is_not_looked_at() -> None:
    photo = held(words("今天的晚饭"), image())
    assert plan(turn_of(photo)) == NOTHING


def test_words_about_the_picture_in_the_batch_want_it_described() -> None:
    photo, question = held(image()), held(words("这图什么意思"))
    assert plan(turn_of(photo, question)) == SightPlan((photo.message_id,), False, ())
    together = held(words("大家看看"), image())
    assert plan(turn_of(together)) == SightPlan((together.message_id,), False, ())


def test_words_about_a_picture_the_batch_does_not_hold_look_back() -> None:
    question = held(words("这是什么意思"))
    assert plan(turn_of(question)) == SightPlan((), True, ())


def test_words_about_a_quoted_picture_name_the_quote() -> None:
    question = held(words("这图啥意思"), reply_to="777")
    assert plan(turn_of(question)) == SightPlan((), False, ("777",))


def test_a_quote_without_picture_words_is_not_followed() -> None:
    answer = held(words("同意"), reply_to="777")
    assert plan(turn_of(answer, disposition=MENTIONED)) == NOTHING


def test_a_voice_is_wanted_even_when_nobody_called() -> None:
    spoken, chat = held(voice()), held(words("嗯嗯"))
    assert plan(turn_of(spoken, chat)) == SightPlan((spoken.message_id,), False, ())
    assert plan(turn_of(spoken, chat), voice=False) == NOTHING


def test_without_vision_pictures_are_never_wanted() -> None:
    photo, question = held(image()), held(words("这图什么意思"))
    assert plan(turn_of(photo, question, disposition=MENTIONED), vision=False) == NOTHING
    assert plan(turn_of(held(words("这图什么意思"))), vision=False) == NOTHING
    assert plan(turn_of(held(words("这图啥意思"), reply_to="777")), vision=False) == NOTHING
    # Voices do not depend on vision.
    spoken = held(voice(), image())
    assert plan(turn_of(spoken), vision=False).messages == (spoken.message_id,)


def test_a_picture_already_described_is_not_wanted_again() -> None:
    seen = held(image("[图片：猫]"))
    assert plan(turn_of(seen, disposition=MENTIONED)) == NOTHING
    asked = held(image("[图片：猫]"), words("这图什么意思"))
    assert plan(turn_of(asked)) == NOTHING  # the batch has its picture: no looking back


# Arrivals.


async def test_arrivals_wake_whoever_expects_the_message() -> None:
    arrivals = Arrivals()
    first, second = arrivals.expect([1, 2])
    assert not first.is_set() and not second.is_set()
    arrivals.arrived(1)
    assert first.is_set() and not second.is_set()
    arrivals.arrived(1)  # told twice, or about a message nobody waits for: nothing happens
    arrivals.arrived(99)
    [again] = arrivals.expect([1])
    assert again is not first and not again.is_set()  # an arrival is used once


async def test_two_waiters_of_one_message_share_its_arrival() -> None:
    arrivals = Arrivals()
    [one] = arrivals.expect([5])
    [other] = arrivals.expect([5])
    assert one is other
    arrivals.arrived(5)
    assert one.is_set()


async def test_a_forgotten_message_wakes_nobody() -> None:
    arrivals = Arrivals()
    kept, dropped = arrivals.expect([3, 4])
    arrivals.forget([4, 77])
    arrivals.arrived(4)
    arrivals.arrived(3)
    assert kept.is_set() and not dropped.is_set()


# Sight.prepare on a real store and a real job worker.


Handler = Callable[[ClaimedJob], Awaitable[None]]


@asynccontextmanager
async def worker(engine: AsyncEngine, handler: Handler | None) -> AsyncIterator[Jobs]:
    jobs = Jobs(JobStore(engine), lambda: datetime.now(UTC))
    if handler is not None:
        jobs.handle(DESCRIBE_KIND, handler)
    await jobs.start()
    try:
        yield jobs
    finally:
        await jobs.stop()


async def write(writer: TimelineWriter, *segments: Segment, **options: str) -> StoredMessage:
    inbound = said(*segments, **options)
    written = await writer.write(inbound)
    assert isinstance(written, MessageWritten)
    return StoredMessage(written.message_id, written.stream_id, written.person_id, inbound)


async def queued(engine: AsyncEngine) -> list[tuple[dict[str, object], str | None]]:
    async with engine.connect() as conn:
        query = select(Job.payload, Job.idempotency_key).where(Job.kind == DESCRIBE_KIND)
        return [(row.payload, row.idempotency_key) for row in await conn.execute(query)]


async def test_a_turn_gets_its_pictures_described_when_the_job_answers(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    arrivals = Arrivals()
    ran: list[int] = []

    async def describe(job: ClaimedJob) -> None:
        ran.append(int(job.payload["message_id"]))
        arrivals.arrived(int(job.payload["message_id"]))

    photo = await write(writer, words("@牛牛 看"), image())
    turn = turn_of(photo, disposition=MENTIONED, turn_id=41)
    async with worker(engine, describe) as jobs:
        sight = Sight(engine, jobs, arrivals, wait_s=lambda: 30.0, vision=True, voice=True)
        trace = await sight.prepare(turn)
    assert trace["messages"] == [photo.message_id] and trace["described"] == 1
    assert ran == [photo.message_id]
    key = f"{DESCRIBE_KIND}:{photo.message_id}:41"
    assert await queued(engine) == [({"message_id": photo.message_id}, key)]


async def test_a_turn_does_not_wait_past_its_limit_for_a_job_that_never_answers(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    arrivals = Arrivals()
    started: list[int] = []
    release = asyncio.Event()

    async def stuck(job: ClaimedJob) -> None:
        started.append(int(job.payload["message_id"]))
        await release.wait()

    photo = await write(writer, image())
    spoken = await write(writer, voice())
    turn = turn_of(photo, spoken, disposition=MENTIONED)
    async with worker(engine, stuck) as jobs:
        sight = Sight(engine, jobs, arrivals, wait_s=lambda: WAIT_S, vision=True, voice=True)
        trace = await sight.prepare(turn)
        release.set()
    assert trace["messages"] == [photo.message_id, spoken.message_id]
    assert trace["described"] == 0
    assert len(await queued(engine)) == 2
    # A late answer finds nobody waiting any more.
    [late] = arrivals.expect([photo.message_id])
    assert not late.is_set()


async def test_words_about_an_earlier_picture_describe_the_newest_one(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    arrivals = Arrivals()

    async def describe(job: ClaimedJob) -> None:
        arrivals.arrived(int(job.payload["message_id"]))

    await write(writer, image())
    newest = await write(writer, image())
    await write(writer, words("哈哈"))
    question = await write(writer, words("这是什么意思"))
    async with worker(engine, describe) as jobs:
        sight = Sight(engine, jobs, arrivals, wait_s=lambda: 30.0, vision=True, voice=False)
        trace = await sight.prepare(turn_of(question))
    assert trace["messages"] == [newest.message_id] and trace["described"] == 1


async def test_words_about_a_quoted_picture_describe_the_quoted_one(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    arrivals = Arrivals()

    async def describe(job: ClaimedJob) -> None:
        arrivals.arrived(int(job.payload["message_id"]))

    quoted = await write(writer, image(), platform_id="pic-quoted")
    await write(writer, image())  # newer, but not the one asked about
    question = await write(writer, words("这图啥意思"), reply_to="pic-quoted")
    async with worker(engine, describe) as jobs:
        sight = Sight(engine, jobs, arrivals, wait_s=lambda: 30.0, vision=True, voice=False)
        trace = await sight.prepare(turn_of(question))
    assert trace["messages"] == [quoted.message_id] and trace["described"] == 1


async def test_a_turn_without_anything_to_understand_queues_nothing(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    chat = await write(writer, words("今天天气不错"))
    async with worker(engine, None) as jobs:
        sight = Sight(engine, jobs, Arrivals(), wait_s=lambda: WAIT_S, vision=True, voice=True)
        assert await sight.prepare(turn_of(chat, disposition=MENTIONED)) == {}
    assert await queued(engine) == []


async def test_a_turn_goes_on_when_the_descriptions_cannot_be_queued(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    arrivals = Arrivals()
    photo = await write(writer, image())
    async with worker(engine, None) as jobs:  # nobody handles media.describe
        sight = Sight(engine, jobs, arrivals, wait_s=lambda: 30.0, vision=True, voice=True)
        trace = await sight.prepare(turn_of(photo, disposition=MENTIONED))
    assert trace["messages"] == [photo.message_id] and trace["described"] == 0
    assert "no handler" in trace["error"]
    [fresh] = arrivals.expect([photo.message_id])  # nothing was left waiting
    assert not fresh.is_set()
