"""Learning the group's terms in memory's after-turn extraction call (docs/slang.md).

  every run: the new lines -> noticing (pure) -> sightings and samples stored
  -> ripe terms (rules.py), at most `terms_per_run`, with the lines they were used in
  -> shown in the call under `slang_candidates`; `slang.learn` offered beside
     memory.remember (calling nothing = learning nothing; a run with ripe terms calls the
     model even when memory has nothing to ask)
  -> each call: the term used in the shown lines, not a name or a number, its meaning past
     memory's guard -> kept with the lines it came from

Everything here is chat text the model reads as data; no line becomes an instruction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKind
from pallas.product.llm.tools.extraction_tools import ExtractionBrief
from pallas.product.llm.tools.registry import to_wire
from pallas.product.slang.config import SlangConfig, SlangSwitches
from pallas.product.slang.noticing import Line, Sighting, answered_in, notice, samples_in
from pallas.product.slang.reference import is_ordinary, ordinary_words, simplified
from pallas.product.slang.rules import (
    MAX_MEANING_CHARS,
    MAX_TERM_CHARS,
    Ripeness,
    TermState,
    confidence,
    is_ripe,
    meaning_refusal,
    term_refusal,
)
from pallas.product.slang.store import SlangStore, Term
from pallas.providers.results import ToolCall
from pallas.store.conversation import WindowLine, lines_by_ids, stream_info

LEARN = "slang.learn"
BRIEF_KEY = "slang_candidates"
EXAMPLES_PER_TERM = 4


def state_of(term: Term) -> TermState:
    return TermState(term.meaning, term.source, term.lines, term.members, term.offers,
                     term.offered_lines, term.learned_at, term.learned_lines)  # fmt: skip


def reading(lines: Sequence[WindowLine], *, as_said: bool = False) -> list[Line]:
    """The members' lines as noticing reads them (simplified; `as_said`: as written, for
    samples), quotes as our ids."""
    ours = {line.platform_message_id: line.message_id for line in lines}
    return [
        Line(line.message_id, line.user_id, line.text if as_said else simplified(line.text),
             ours.get(line.reply_to, 0) if line.reply_to else None)
        for line in lines
        if not (line.from_bot or line.suppressed or line.recalled or line.is_poke)
    ]


class SlangLearnTool:
    name = LEARN
    instruction = (
        "- slang.learn：slang_candidates 里是这个群反复在说的词和用到它的消息编号。"
        "能从这些消息看出它在这个群里指什么（外号、梗、缩写）时，每个词调用一次，"
        "meaning 写成不超过 30 字的解释，比如“群主家的猫”；看不出来、只是普通说法、"
        "或者是骂人的话，就不要调用。"
    )

    def __init__(
        self,
        engine: AsyncEngine,
        store: SlangStore,
        config: SlangConfig,
        switches: Callable[[str], Awaitable[SlangSwitches]],
    ) -> None:
        self._engine = engine
        self._store = store
        self._config = config
        self._switches = switches
        # The terms offered in each chat's runs (runs may overlap: a union), what `take`
        # accepts; a chat's lines are read by one run at a time.
        self._offered: dict[int, dict[str, Term]] = {}
        self._reading: dict[int, asyncio.Lock] = {}

    def spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": to_wire(LEARN),
                "description": "记下这个群里一个词的意思（只学 slang_candidates 里的词）。",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "term": {"type": "string", "description": "词本身"},
                        "meaning": {"type": "string", "description": "在这个群里指什么"},
                        "examples": {
                            "type": "array",
                            "items": {"type": "integer"},
                            "description": "看出意思的消息编号",
                        },
                    },
                    "required": ["term", "meaning"],
                },
            },
        }

    async def brief(
        self, new_lines: Sequence[WindowLine], stream_id: int, now: datetime
    ) -> ExtractionBrief | None:
        async with self._reading.setdefault(stream_id, asyncio.Lock()):
            return await self._brief(new_lines, stream_id, now)

    async def _brief(
        self, new_lines: Sequence[WindowLine], stream_id: int, now: datetime
    ) -> ExtractionBrief | None:
        cursor = await self._store.cursor(stream_id)
        fresh = [line for line in new_lines if line.message_id > cursor]
        info = await stream_info(self._engine, stream_id)
        group = info is not None and info.kind == StreamKind.GROUP.value
        switches = await self._switches(str(stream_id)) if group else SlangSwitches(
            learn=False, samples=self._config.private_samples)  # fmt: skip
        if fresh and switches.samples:
            await self._keep_samples(stream_id, fresh, now)
        if fresh:  # counted once: a run that fails before its call does not count again
            seen = await self._notice(stream_id, fresh) if switches.learn else []
            await self._store.record(stream_id, seen, fresh[-1].message_id, now)
        if not switches.learn:
            self._offered.pop(stream_id, None)
            return None
        return await self._offer(stream_id, new_lines, now)

    async def _notice(self, stream_id: int, lines: Sequence[WindowLine]) -> list[Sighting]:
        reference = await asyncio.to_thread(ordinary_words)  # read once per process
        names = {simplified(line.speaker).lower() for line in lines if line.speaker}
        known = await self._store.known_terms(stream_id)
        return notice(reading(lines), known, lambda term: is_ordinary(term, reference), names)

    async def _offer(
        self, stream_id: int, new_lines: Sequence[WindowLine], now: datetime
    ) -> ExtractionBrief | None:
        policy = Ripeness(self._config.min_lines, self._config.min_members)
        ripe = [t for t in await self._store.terms(stream_id) if is_ripe(state_of(t), now, policy)]
        ripe.sort(key=lambda t: (-t.members, -t.lines, t.term))
        ripe = ripe[: self._config.terms_per_run]
        if not ripe:
            return None
        wanted = sorted({i for t in ripe for i in t.evidence[-EXAMPLES_PER_TERM:]})
        have = {line.message_id: line for line in new_lines}
        shown = [have[i] for i in wanted if i in have]
        shown += await lines_by_ids(self._engine, stream_id, [i for i in wanted if i not in have])
        shown = [ln for ln in shown if not (ln.from_bot or ln.recalled or ln.suppressed)]
        standing = {ln.message_id for ln in shown}
        self._offered.setdefault(stream_id, {}).update({t.term: t for t in ripe})
        data = [{"term": t.term,
                 "用到它的消息": [i for i in t.evidence[-EXAMPLES_PER_TERM:] if i in standing],
                 **({"以前学到的意思": t.meaning} if t.meaning else {})} for t in ripe]  # fmt: skip
        logger.info("slang: chat {}: {} term(s) offered to learn", stream_id, len(ripe))
        return ExtractionBrief(BRIEF_KEY, data, tuple(sorted(shown, key=lambda ln: ln.message_id)))

    async def answered(self, brief: ExtractionBrief, stream_id: int) -> None:
        """The model saw this brief's terms: an offer counts only now."""
        offered = self._offered.get(stream_id, {})
        shown = [offered[item["term"]] for item in brief.data if item["term"] in offered]
        await self._store.mark_offered(stream_id, shown)

    async def _keep_samples(
        self, stream_id: int, lines: Sequence[WindowLine], now: datetime
    ) -> None:
        said = reading(lines, as_said=True)
        seen = []
        for sample in samples_in(said, answered_in(said)):
            if meaning_refusal("", sample.text, now) is None:  # memory's content rules
                cue = next((ln.text for ln in said if ln.message_id == sample.answered_id), "")
                seen.append((sample, cue))
        await self._store.keep_samples(stream_id, seen, now)
        await self._store.answered(
            stream_id, [ln.reply_to for ln in lines if ln.reply_to and not ln.from_bot]
        )

    async def take(
        self, call: ToolCall, lines: Sequence[WindowLine], stream_id: int, now: datetime
    ) -> bool:
        args = call.arguments if isinstance(call.arguments, dict) else {}
        raw_term, meaning = args.get("term"), args.get("meaning")
        if not isinstance(raw_term, str) or not isinstance(meaning, str):
            logger.info("slang: a learn call without a text term and meaning, left out")
            return False
        try:
            term = simplified(raw_term[: MAX_TERM_CHARS + 1]).strip().lower()
        except UnicodeError:  # a lone surrogate from the model: no term
            return False
        meaning = meaning[: MAX_MEANING_CHARS + 1].strip()
        offered = self._offered.get(stream_id, {}).get(term)
        cited = citing(term, lines, message_ids(args.get("examples")))
        names = {simplified(ln.speaker).lower() for ln in lines if ln.speaker}
        refusal = (
            ("the term was not offered in this run" if offered is None else None)
            or term_refusal(term, names, [ln.text for ln in cited])
            or meaning_refusal(term, meaning, now)
        )
        if refusal is not None or offered is None:
            logger.info("slang: {!r} = {!r} refused: {}", term, meaning[:60], refusal)
            return False
        sure = confidence(offered.lines, offered.members)
        kept = await self._store.learn(stream_id, term, meaning, [ln.message_id for ln in cited],
                                       "extraction", sure, now)  # fmt: skip
        logger.info("slang: chat {}: learned {!r} = {!r} ({})", stream_id, term, meaning, kept)
        return kept


def message_ids(value: object) -> set[int]:
    """The `examples` a model gave: a list of ids (numbers or digit strings); else none."""
    if not isinstance(value, list):
        return set()
    found = set()
    for item in value[:20]:
        if isinstance(item, int) and not isinstance(item, bool):
            found.add(item)
        elif isinstance(item, str) and item.strip().isdecimal() and item.strip().isascii():
            found.add(int(item.strip()[:18]))
    return found


def citing(term: str, lines: Sequence[WindowLine], examples: set[int]) -> list[WindowLine]:
    """The shown members' lines (simplified) that use the term: the cited ones if any."""
    using = [
        replace(line, text=simplified(line.text).lower())
        for line in lines
        if term and not (line.from_bot or line.recalled)
        and term in simplified(line.text).lower()
    ]
    return [ln for ln in using if ln.message_id in examples] or using
