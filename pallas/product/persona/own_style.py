"""The bot's own style in each turn: the account's stored character, plus one line of how it is
right now (mood, the hour's routine, the session's tone, a private chat's "long time no see"
hint once), all from fixed vocabularies, never from what anyone wrote. The mood listener takes a
reply's mood markers as mood events; the nightly fingerprint job learns the habits of its
replies that landed, shown as data (`StyleHabits`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKind
from pallas.product.conversation.jobs.periodic import PeriodicJob
from pallas.product.conversation.turns.turn import Turn
from pallas.product.llm.agent.output import IntentKind
from pallas.product.llm.agent.reply_forms import FormContext
from pallas.product.llm.assembler.context import Character, CharacterSource, ContextBlock
from pallas.product.persona.fingerprint import SentReply, fingerprint
from pallas.product.persona.mood import GROUP_WEIGHT, mood_line, moved, settled
from pallas.product.persona.routine import asked_what_doing, routine_line
from pallas.product.persona.session import Session, refreshed
from pallas.product.persona.style_store import (
    BotStyleStore,
    StoredSession,
    accounts,
    replies_with_answers,
)
from pallas.store.jobs import ClaimedJob


class StateLines(Protocol):
    """More of how the bot is in this turn: its promises, how to say it was attacked."""

    async def lines(self, turn: Turn) -> list[str]: ...


class OwnStyle:
    """The character a turn speaks in, as the core keeps it (`base`), with how the bot is
    right now (the assembler asks once per turn)."""

    def __init__(
        self,
        store: BotStyleStore,
        base: CharacterSource,
        clock: Callable[[], datetime],
        rng: Callable[[], random.Random],
        more: Sequence[StateLines] = (),
    ) -> None:
        self._store = store
        self._base = base
        self._clock = clock
        self._rng = rng
        self._more = more

    async def character(self, turn: Turn) -> Character:
        now = self._clock()
        stored = await self._base.character(turn)
        parts = [await self._mood(turn, now), routine_line(now, asked_what_doing(turn.text))]
        parts += await self._session(turn, now)
        for more in self._more:
            parts += await more.lines(turn)
        state = "；".join(part for part in parts if part)
        return replace(stored, state=state)

    async def _mood(self, turn: Turn, now: datetime) -> str:
        valence, since = await self._store.mood(turn.stream.self_id)
        return mood_line(settled(valence, since, now)) if since else ""

    async def _session(self, turn: Turn, now: datetime) -> list[str]:
        if not turn.messages:  # the bot's own turn: the session goes on as it is
            stored = await self._store.session(turn.stream_id)
            return [f"这段聊天里你{stored.tone}"] if stored else []
        first = min(m.message_id for m in turn.messages)
        last_seen = await self._store.last_seen_before(turn.stream_id, first)
        stored = await self._store.session(turn.stream_id)
        current = Session(**stored.__dict__) if stored else None
        private = turn.stream.kind is StreamKind.PRIVATE
        fresh = refreshed(current, last_seen, now, private, self._rng())
        session = fresh or current
        assert session is not None  # refreshed() starts one when there was none
        if fresh is not None or session.resumption:
            # The hint is given once: the stored session keeps none after this turn.
            kept = StoredSession(session.started_at, session.tone, "")
            await self._store.set_session(turn.stream_id, kept)
        return [f"这段聊天里你{session.tone}", session.resumption]


class MoodListener:
    """Hears a reply's mood markers as mood events (a group's weigh less)."""

    name = "mood"

    def __init__(self, store: BotStyleStore) -> None:
        self._store = store

    async def heard(self, context: FormContext) -> None:
        words = [i.value for i in context.intents if i.kind is IntentKind.MOOD and i.value]
        if not words:
            return
        self_id = context.turn.stream.self_id
        valence, since = await self._store.mood(self_id)
        group = context.turn.stream.kind is StreamKind.GROUP
        weight = GROUP_WEIGHT if group else 1.0
        now = context.now
        await self._store.set_mood(self_id, moved(valence, since or now, now, words, weight), now)


FINGERPRINT_KIND = "persona.fingerprint"
FINGERPRINT = PeriodicJob(name="persona_fingerprint", kind=FINGERPRINT_KIND, cron="17 5 * * *")
RECENT_REPLIES = 300
ANSWERS_READ = 3


async def learn_fingerprint(
    job: ClaimedJob, engine: AsyncEngine, store: BotStyleStore, clock: Callable[[], datetime]
) -> None:
    """Nightly: each account's habits from its recent replies that landed well."""
    for self_id in await accounts(engine):
        rows = await replies_with_answers(engine, self_id, RECENT_REPLIES, ANSWERS_READ)
        replies = [SentReply(r.text, r.answers, r.quoted) for r in rows]
        await store.set_phrases(self_id, fingerprint(replies), clock())


class StyleHabits:
    """The context source: the habits of the bot's own replies that landed, as data."""

    name = "style"

    def __init__(self, store: BotStyleStore) -> None:
        self._store = store

    async def fetch(self, turn: Turn) -> ContextBlock | None:
        phrases = await self._store.phrases(turn.stream.self_id)
        if not phrases:
            return None
        text = "、".join(phrases) + "（自然就好，别硬套）"
        return ContextBlock(self.name, "你最近说话的小习惯", text, priority=3)
