"""One follow-up chance after a private reply (docs/persona.md).

  a private turn that answered someone with words ended -> job `persona.follow_up`, due at a
  random moment 20-60 minutes later (the job table holds it across restarts)
  -> when due: anything said in the chat since (by them or by the bot) -> skipped: a new
     message from that person is what cancels the chance; the bot asleep then -> skipped
     (unless `at_night`)
  -> else a turn of the bot's own (turns/proactive.py): it may say one thing, or nothing
A follow-up's own turn never arms another: one chance per reply, at most once (max_attempts 1).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKind
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.conversation.turns.observers import TurnEnded, TurnEnding
from pallas.product.conversation.turns.proactive import ProactiveOutcome, ProactiveTurns
from pallas.product.conversation.turns.turn import Occasion
from pallas.product.persona.config import FollowUpConfig
from pallas.product.persona.promise_store import SaidSince, said_since, turn_sent_words
from pallas.product.persona.routine import slot_at
from pallas.store.audit import EventKind
from pallas.store.jobs import ClaimedJob
from pallas.store.ledger import LedgerEvent, LedgerWriter

FOLLOW_UP_KIND = "persona.follow_up"
OCCASION = "private_follow_up"
ASLEEP_ACTIVITY = "睡觉"
HINT = (
    "你上次回复之后，对方{minutes}分钟没再说话。如果有自然想补充、关心或接着聊的一句就说；"
    "对方只是聊完了的话就 silent。"
)


class FollowUpVerdict(StrEnum):
    GO = "go"
    THEY_SPOKE = "they_spoke"  # the person wrote again: that cancels the chance
    BOT_SPOKE = "bot_spoke"  # the bot already said more
    ASLEEP = "asleep"  # the bot's day has it asleep at that hour
    BUSY = "busy"  # a turn held the chat when the time came
    DISABLED = "disabled"  # follow-ups were switched off after this one was armed


def follow_up_delay(config: FollowUpConfig, rng: random.Random) -> timedelta:
    """When the chance comes after the reply (pure: the randomness is passed in)."""
    return timedelta(minutes=rng.uniform(config.min_minutes, config.max_minutes))


def judge_follow_up(said: SaidSince, now: datetime, at_night: bool = False) -> FollowUpVerdict:
    """Whether the chance is still there at `now` (pure); `at_night`: sleeping hours too."""
    if said.theirs:
        return FollowUpVerdict.THEY_SPOKE
    if said.bots:
        return FollowUpVerdict.BOT_SPOKE
    if not at_night and slot_at(now).activity == ASLEEP_ACTIVITY:
        return FollowUpVerdict.ASLEEP
    return FollowUpVerdict.GO


@dataclass
class FollowUpDeps:
    engine: AsyncEngine
    jobs: Jobs
    ledger: LedgerWriter
    proactive: ProactiveTurns
    config: Callable[[], FollowUpConfig]  # asked where it acts: the console changes it
    clock: Callable[[], datetime]
    rng: Callable[[], random.Random]


class FollowUpArm:
    """The after-turn observer that arms the chance."""

    name = "follow_up"

    def __init__(self, deps: FollowUpDeps) -> None:
        self._deps = deps

    async def turn_ended(self, ended: TurnEnded) -> None:
        deps = self._deps
        if not deps.config().enabled:
            return
        if ended.stream.kind is not StreamKind.PRIVATE or ended.occasion:
            return  # groups have their own rhythm; a turn of the bot's own arms nothing
        if ended.ending is not TurnEnding.DONE or not ended.message_ids:
            return
        if not await turn_sent_words(deps.engine, ended.turn_id):
            return
        mark = max(ended.message_ids)  # their batch: anything newer from them cancels
        payload = {
            "stream_id": ended.stream_id,
            "turn_id": ended.turn_id,
            "after": mark,
            "replied_at": ended.at.isoformat(),
        }
        await deps.jobs.enqueue(
            FOLLOW_UP_KIND,
            payload,
            key=f"{FOLLOW_UP_KIND}:{ended.turn_id}",
            due_at=ended.at + follow_up_delay(deps.config(), deps.rng()),
            max_attempts=1,
        )


async def run_follow_up(job: ClaimedJob, deps: FollowUpDeps) -> None:
    stream_id, after = int(job.payload["stream_id"]), int(job.payload["after"])
    now = deps.clock()
    said = await said_since(deps.engine, stream_id, after, int(job.payload["turn_id"]))
    config = deps.config()
    verdict = judge_follow_up(said, now, config.at_night)
    if not config.enabled:
        verdict = FollowUpVerdict.DISABLED
    if verdict is FollowUpVerdict.GO:
        replied_at = datetime.fromisoformat(str(job.payload["replied_at"]))
        minutes = max(1, int((now - replied_at).total_seconds() // 60))
        occasion = Occasion(OCCASION, HINT.format(minutes=minutes), key=job.key or "")
        result = await deps.proactive.start(stream_id, occasion)
        if result.outcome is ProactiveOutcome.RAN:
            return
        verdict = FollowUpVerdict.BUSY
    deps.ledger.record(
        LedgerEvent(
            EventKind.FOLLOW_UP_SKIPPED,
            stream_id,
            verdict.value,
            payload={"turn_id": job.payload.get("turn_id"), "job_id": job.id},
        )
    )
