"""Pictures and voices understood when the turn needs them, and only then.

  turn -> which of its messages hold a picture the question depends on, or a voice
  -> job `media.describe` per message (durable: a crash still rewrites the row later)
  -> the turn waits for its own messages only, at most `sight_wait_s`; other chats never wait
  -> the context is read after the wait, so the rewritten lines are what the model sees

A picture is looked at when someone called the bot in the batch that holds it, or when the
batch's words point at a picture (its own, the one it quotes, or the newest one just before
it). Voices in a turn are always transcribed: without the words there is nothing to answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import Segment, SegmentKind
from pallas.core.media import UNDESCRIBED, VOICE_PLACEHOLDER
from pallas.core.text import typed_text
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.conversation.turns.turn import Turn
from pallas.store.message_media import undescribed_pictures_before

DESCRIBE_KIND = "media.describe"
# Words that point at a picture: the question depends on what it shows.
PICTURE_WORDS = (
    "图",
    "照片",
    "截图",
    "表情包",
    "看看",
    "看下",
    "看一下",
    "瞧瞧",
    "这是什么",
    "这是啥",
    "这啥",
    "啥意思",
    "什么意思",
    "认得",
    "认识",
)
LOOK_BACK = 5  # lines before the batch searched for "the picture" the words point at
# The worker claims the oldest due job first: a turn is waiting for this one, so it goes ahead
# of the fetches and extractions already queued.
AHEAD_OF_THE_QUEUE = datetime(1970, 1, 1, tzinfo=UTC)


def undescribed(segment: Segment) -> bool:
    return segment.kind is SegmentKind.IMAGE and segment.text in UNDESCRIBED


def untranscribed(segment: Segment) -> bool:
    return segment.kind is SegmentKind.RECORD and segment.text == VOICE_PLACEHOLDER


def points_at_picture(text: str) -> bool:
    return any(word in text for word in PICTURE_WORDS)


@dataclass(frozen=True)
class SightPlan:
    """What a turn needs understood (pure result of `plan_sight`)."""

    messages: tuple[int, ...]  # batch messages to describe
    look_back: bool  # the words point at a picture the batch does not hold
    quoted: tuple[str, ...]  # platform ids the batch quotes, whose pictures may be meant


def plan_sight(turn: Turn, *, vision: bool, voice: bool) -> SightPlan:
    """Which messages of the turn to describe, from the batch alone (pure)."""
    direct = turn.disposition.is_direct_call
    # The batch's own words: a picture's placeholder ("[图片]") points at nothing.
    pointed = points_at_picture(_typed_words(turn))
    wanted: list[int] = []
    has_picture = False
    for stored in turn.messages:
        segments = stored.message.segments
        pictures = any(undescribed(s) for s in segments)
        has_picture = has_picture or any(s.kind is SegmentKind.IMAGE for s in segments)
        if (vision and pictures and (direct or pointed)) or (
            voice and any(untranscribed(s) for s in segments)
        ):
            wanted.append(stored.message_id)
    quoted = tuple(m.message.reply_to for m in turn.messages if m.message.reply_to is not None)
    wants_more = vision and pointed and not has_picture
    return SightPlan(tuple(wanted), wants_more and not quoted, quoted if wants_more else ())


def _typed_words(turn: Turn) -> str:
    return "\n".join(typed_text(m.message.segments) for m in turn.messages)


class Arrivals:
    """Which described messages a waiting turn is waiting for (in memory: a turn cut off by a
    restart is not waiting any more; the job still rewrites the row)."""

    def __init__(self) -> None:
        self._events: dict[int, asyncio.Event] = {}

    def expect(self, message_ids: Iterable[int]) -> list[asyncio.Event]:
        return [self._events.setdefault(mid, asyncio.Event()) for mid in message_ids]

    def arrived(self, message_id: int) -> None:
        event = self._events.pop(message_id, None)
        if event is not None:
            event.set()

    def forget(self, message_ids: Iterable[int]) -> None:
        for mid in message_ids:
            self._events.pop(mid, None)


class Sight:
    """The turn preparer: asks for the turn's pictures and voices, waits for them a while."""

    name = "sight"

    def __init__(
        self,
        engine: AsyncEngine,
        jobs: Jobs,
        arrivals: Arrivals,
        *,
        wait_s: Callable[[], float],
        vision: bool,
        voice: bool,
    ) -> None:
        self._engine = engine
        self._jobs = jobs
        self._arrivals = arrivals
        self._wait_s = wait_s  # asked at every turn: the console may change it
        self._vision = vision
        self._voice = voice

    async def prepare(self, turn: Turn) -> Mapping[str, Any]:
        plan = plan_sight(turn, vision=self._vision, voice=self._voice)
        wanted = list(plan.messages)
        if plan.look_back or plan.quoted:
            batch_start = min(m.message_id for m in turn.messages)
            wanted += await undescribed_pictures_before(
                self._engine, turn.stream_id, batch_start, plan.quoted, LOOK_BACK
            )
        if not wanted:
            return {}
        return await self._describe(turn, wanted)

    async def _describe(self, turn: Turn, message_ids: Sequence[int]) -> Mapping[str, Any]:
        started = time.monotonic()
        events = self._arrivals.expect(message_ids)
        try:
            for mid in message_ids:
                key = f"{DESCRIBE_KIND}:{mid}:{turn.turn_id}"
                await self._jobs.enqueue(
                    DESCRIBE_KIND, {"message_id": mid}, key=key, due_at=AHEAD_OF_THE_QUEUE
                )
        except Exception as exc:  # the turn goes on without the pictures
            logger.warning("turn {}: descriptions not queued: {!r}", turn.turn_id, exc)
            self._arrivals.forget(message_ids)
            return {"messages": list(message_ids), "described": 0, "error": repr(exc)[:200]}
        wait_s = self._wait_s()
        try:
            async with asyncio.timeout(wait_s):
                await asyncio.gather(*(event.wait() for event in events))
        except TimeoutError:
            logger.info(
                "turn {}: went on without {} of {} description(s) after {} s",
                turn.turn_id,
                sum(not e.is_set() for e in events),
                len(events),
                wait_s,
            )  # the queued jobs still arrive and clear their events; another turn may wait too
        waited_ms = round((time.monotonic() - started) * 1000)
        described = sum(e.is_set() for e in events)
        return {"messages": list(message_ids), "described": described, "waited_ms": waited_ms}
