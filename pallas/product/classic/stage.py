"""Learned lines as a stage before the gate (docs/classic.md): it learns each pair of
consecutive member lines as it is committed, answers a known context with a learned line
through the outbox (no model), and takes an admin's "不可以" to a learned line as a ban.

Arbitration with the agent: a message that calls the bot (an @, a reply to it, its name) is
the agent's, unless the model cannot answer (no chat model, model chat off in the group, the
day's cap reached); a message while the bot's natural reply window is open is left to the
agent too. A message answered with a learned line is handled: the gate does not also start a
turn for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from loguru import logger

from pallas.core.actions import Origin, counts_as_speaking
from pallas.core.inbound import Segment, SegmentKind, StreamKind
from pallas.core.text import typed_text
from pallas.product.classic.learning import FRESH_S, Learning, Sighting
from pallas.product.classic.lines import (
    Candidate,
    Line,
    choose,
    hashed,
    is_ban,
    key_of,
    learnable,
    roll_of,
    sayable,
    segments_json,
)
from pallas.product.classic.settings import SECTION, ClassicKnobs
from pallas.product.classic.store import LearnedStore, Said
from pallas.product.conversation.delivery.contract import OutgoingMessage
from pallas.product.conversation.delivery.payload import PayloadError
from pallas.product.conversation.gate.signals import names_in
from pallas.product.conversation.ingress import CONTINUE, StageResult, StoredMessage, Verdict
from pallas.product.extensions import CoreServices
from pallas.providers.catalog import ModelType
from pallas.store import kernel_state
from pallas.store.sql import BoundedCache

SEED = "pallas-learned"
FOLLOW_UP_S = 90.0  # the gate's natural reply window: the agent's, not a learned line's
BANNED = "好，以后不这么说了。"



@dataclass
class ClassicParts:
    core: CoreServices
    store: LearnedStore
    learning: Learning


class ClassicStage:
    name = "learned"

    def __init__(self, parts: ClassicParts) -> None:
        self._parts = parts
        self._core = parts.core
        self._last: BoundedCache[int, Line | None] = BoundedCache(5_000)  # each group's last
        self._spoke: BoundedCache[int, datetime] = BoundedCache(5_000)  # the bot, talking
        self._answered: BoundedCache[int, datetime] = BoundedCache(5_000)  # a learned line
        self._knobs: BoundedCache[int, tuple[dict[str, Any], ClassicKnobs]] = BoundedCache(5_000)
        # (group, context) -> (the learning's generation, when asked, the candidates then)
        self._found: BoundedCache[tuple[int, str], tuple[int, float, list[Candidate]]] = (
            BoundedCache(20_000)
        )

    async def on_message(self, stored: StoredMessage) -> StageResult:
        msg = stored.message
        if msg.stream.kind is not StreamKind.GROUP or msg.is_poke:
            return CONTINUE
        knobs = await self._knobs_of(stored.stream_id)
        if await self._ban(stored, knobs):
            return StageResult(Verdict.HANDLED, "learned_banned")
        line = await self._line(stored)
        previous = self._last.get(stored.stream_id)
        self._last.put_all({stored.stream_id: line})
        if knobs.learn and previous is not None and learnable(previous, line):
            await self._learn(stored, previous, line)
        if not knobs.answer or not line.key:
            return CONTINUE
        return await self._answer(stored, line, knobs)

    async def on_own_message(self, stored: StoredMessage) -> None:
        """The bot spoke: no pair spans its line, and talking opens the agent's window."""
        self._last.put_all({stored.stream_id: None})
        if counts_as_speaking(stored.message.origin):
            self._spoke.put_all({stored.stream_id: self._core.clock()})

    async def _line(self, stored: StoredMessage) -> Line:
        msg = stored.message
        to_bot = msg.mentions_me or names_in(typed_text(msg.segments), self._core.bot_names)
        if not to_bot and msg.reply_to:
            to_bot = await kernel_state.is_bot_message(
                self._core.engine, stored.stream_id, msg.reply_to
            )
        return Line(
            key=key_of(msg.text, msg.segments),
            text=msg.text.strip(),
            sender=stored.sender_person_id,
            at=msg.time.timestamp(),
            sayable=sayable(msg.segments),
            to_bot=to_bot,
            message_id=stored.message_id,
        )

    async def _knobs_of(self, stream_id: int) -> ClassicKnobs:
        """The group's switches: the stored values (the settings table's cache), checked
        again only when they changed."""
        stored = await self._core.settings_table.load(SECTION, str(stream_id))
        known = self._knobs.get(stream_id)
        if known is not None and known[0] == stored:
            return known[1]
        try:
            knobs = ClassicKnobs.model_validate(stored)
        except ValueError as exc:  # stored under other bounds: the defaults hold
            logger.warning("learned lines: group {} settings not valid now: {}", stream_id, exc)
            knobs = ClassicKnobs()
        self._knobs.put_all({stream_id: (stored, knobs)})
        return knobs

    async def _learn(self, stored: StoredMessage, context: Line, answer: Line) -> None:
        self._parts.learning.saw(
            Sighting(
                stored.stream_id,
                Said(hashed(context.key), context.text[:120]),
                Said(hashed(answer.key), answer.text[:200]),
                list(segments_json(stored.message.segments)),
                answer.sender,
                self._core.clock(),
                (context.message_id, answer.message_id),
                context.sender,
            )
        )

    async def _answer(self, stored: StoredMessage, line: Line, knobs: ClassicKnobs) -> StageResult:
        now = self._core.clock()
        if line.to_bot and await self._model_can_answer(stored):
            return CONTINUE  # a call is the agent's while it can answer
        spoke = self._spoke.get(stored.stream_id)
        if not line.to_bot and spoke is not None and (now - spoke).total_seconds() < FOLLOW_UP_S:
            return CONTINUE  # the talk is following the bot's own line: the agent's
        context = hashed(line.key)
        if not self._parts.learning.may_answer(context):
            return CONTINUE  # nobody ever answered it: no query
        candidates = await self._candidates(stored.stream_id, context)
        last = self._answered.get(stored.stream_id)
        since = None if last is None else (now - last).total_seconds()
        pick = choose(candidates, knobs.rules(), roll_of(SEED, stored.message_id), since)
        if pick is None:
            return CONTINUE
        action = self._core.action_ids()
        segments = tuple(Segment.from_json(dict(s)) for s in pick.segments)
        # What was said, by hashes: a ban quoting it needs no pair row (it may be forgotten).
        key = f"learned:{stored.message_id}:{context}:{pick.answer_hash}"
        outgoing = OutgoingMessage(action, stored.stream_id, segments, key, origin=Origin.LEARNED,
                                   account=stored.message.stream.self_id)  # fmt: skip
        try:
            await self._core.sender.send(outgoing)
        except PayloadError as exc:
            logger.warning("learned line {} not said: {}", pick.pair_id, exc)
            return CONTINUE
        self._answered.put_all({stored.stream_id: now})
        return StageResult(Verdict.HANDLED, "learned", action)

    async def _candidates(self, stream_id: int, context: str) -> list[Candidate]:
        """The store's candidates for a context, asked again after FRESH_S (what learning
        added since) or at once after a ban (the learning's generation)."""
        generation, now = self._parts.learning.generation, time.monotonic()
        hit = self._found.get((stream_id, context))
        if hit is not None and hit[0] == generation and now - hit[1] < FRESH_S:
            return hit[2]
        found = await self._parts.store.candidates(stream_id, context)
        self._found.put_all({(stream_id, context): (generation, now, found)})
        return found

    async def _model_can_answer(self, stored: StoredMessage) -> bool:
        core = self._core
        if not core.models.catalog.of_type(ModelType.CHAT):
            return False
        budget = core.models.budget
        if budget is not None and budget.spent_out():
            return False
        overrides = await kernel_state.policy_overrides(core.engine, stored.stream_id) or {}
        return bool(overrides.get("model_chat", True))

    async def _ban(self, stored: StoredMessage, knobs: ClassicKnobs) -> bool:
        """An owner's or admin's ban word quoting a learned line: never said again."""
        msg, core = stored.message, self._core
        if not msg.reply_to or not is_ban(typed_text(msg.segments), knobs.ban_words):
            return False
        owner = msg.sender.user_id in core.superusers
        if not owner and msg.sender.role not in ("owner", "admin"):
            return False
        key = await core.outbox.key_of_sent(stored.stream_id, msg.reply_to)
        parts = key.split(":") if key is not None else []
        if len(parts) != 4 or parts[0] != "learned" or not parts[2] or not parts[3]:
            return False
        said = await kernel_state.message_text(core.engine, stored.stream_id, msg.reply_to)
        written = await self._parts.store.context_text(parts[2])
        context, answer = Said(parts[2], written), Said(parts[3], said[:200])
        where = None if owner else stored.stream_id  # an owner's ban holds everywhere
        await self._parts.store.ban_said(where, context, answer, stored.sender_person_id,
                                         core.clock())  # fmt: skip
        self._parts.learning.changed()
        logger.info("learned line {} banned in {}", parts[3], where or "every group")
        action = core.action_ids()
        words = (Segment(SegmentKind.TEXT, text=BANNED),)
        key = f"learned.ban:{stored.message_id}"
        account = stored.message.stream.self_id
        await core.sender.send(
            OutgoingMessage(
                action, stored.stream_id, words, key, origin=Origin.RESPONDER, account=account
            )
        )
        return True
