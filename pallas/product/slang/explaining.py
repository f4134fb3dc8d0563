"""The group's words at a turn (docs/slang.md): the meanings of the learned terms the batch
or the recent lines use, looked up once at assembly and shared by every call of the turn;
two or three of the group's own short answers for the call that writes a reply; and
`slang.explain` for the model to ask about a term.

Meanings and samples are the group's usage, quoted in the user message's data, never in the
system role.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.clock import utc_now
from pallas.core.inbound import StreamKind
from pallas.product.conversation.turns.turn import Turn
from pallas.product.llm.assembler.context import ContextBlock
from pallas.product.llm.tools.base import (
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolSpec,
    ToolTag,
    Visibility,
)
from pallas.product.slang.config import SlangConfig, SlangSwitches
from pallas.product.slang.reference import simplified
from pallas.product.slang.rules import SampleChoice, pick_samples, terms_in
from pallas.product.slang.store import SlangStore
from pallas.store.conversation import window_up_to

MEANING_CHARS = 40  # one meaning as shown
USED_EVERY = timedelta(hours=1)  # "last used" is written at most this often per term
MARKS_KEPT = 10_000
HINTS = ("什么意思", "啥意思", "是谁", "是啥", "指什么", "黑话", "梗", "外号")


class SlangMeanings:
    """The block of the group's terms used in the batch or the recent lines."""

    name = "slang"

    def __init__(self, engine: AsyncEngine, store: SlangStore, config: SlangConfig) -> None:
        self._engine = engine
        self._store = store
        self._config = config
        self._marked: dict[tuple[int, str], datetime] = {}  # when "last used" was written

    async def fetch(self, turn: Turn) -> ContextBlock | None:
        meanings = await self._store.meanings(turn.stream_id)
        if not meanings:  # the usual chat: one cached read, no window read
            return None
        window = await window_up_to(self._engine, turn.stream_id, turn.watermark,
                                    turn.timeline_size + len(turn.messages))  # fmt: skip
        texts = [simplified(line.text) for line in window if not line.recalled]
        used = terms_in([simplified(turn.text), *texts], meanings)[: self._config.terms_per_turn]
        if not used:
            return None
        await self._mark_used(turn.stream_id, used)
        rows = [f"{term}：{meanings[term][:MEANING_CHARS]}" for term in used]
        return ContextBlock(
            source=self.name,
            title="这个群里的说法（群友们的用法，只是资料）",
            text="\n".join(rows),
            priority=2,
            trace={"terms": used},
        )


    async def _mark_used(self, stream_id: int, terms: list[str]) -> None:
        """The turn's terms as used today: a write at most hourly per term, not every turn."""
        now = utc_now()
        due = [t for t in terms if now - self._marked.get((stream_id, t), _NEVER) >= USED_EVERY]
        if not due:
            return
        if len(self._marked) > MARKS_KEPT:
            self._marked.clear()
        self._marked.update({(stream_id, t): now for t in due})
        try:  # a bookkeeping write: never the turn's failure
            await self._store.used(stream_id, due, now)
        except Exception as exc:
            logger.opt(exception=exc).warning("slang: 'last used' not written for {}", stream_id)


_NEVER = datetime.min.replace(tzinfo=UTC)


class ExpressionSamples:
    """Two or three of the group's own short answers, for the call that writes the reply."""

    name = "expression_samples"

    def __init__(
        self,
        store: SlangStore,
        config: SlangConfig,
        switches: Callable[[str], Awaitable[SlangSwitches]],
    ) -> None:
        self._store = store
        self._config = config
        self._switches = switches

    async def fetch(self, turn: Turn) -> ContextBlock | None:
        if turn.proactive or self._config.samples_per_reply == 0:
            return None
        if turn.stream.kind is StreamKind.GROUP:
            if not (await self._switches(str(turn.stream_id))).samples:
                return None
        elif not self._config.private_samples:
            return None
        kept = await self._store.samples(turn.stream_id)
        if not kept:
            return None
        choices = [SampleChoice(s.id, s.text, s.cue, s.weight) for s in kept]
        picked = pick_samples(choices, turn.text, self._config.samples_per_reply)
        return ContextBlock(
            source=self.name,
            title="群友平时怎么接话（学长短和语气，不要照抄内容）",
            text="\n".join(f"「{p.text}」" for p in picked),
            priority=1,
            shapes_reply=True,
            trace={"samples": [p.id for p in picked]},
        )


class SlangExplainTool(Tool):
    spec = ToolSpec(
        name="slang.explain",
        description="查这个群里某个词（外号、梗、缩写）是什么意思：只答群里学到的，不知道就说不知道。",
        parameters={"type": "object",
                    "properties": {"term": {"type": "string", "description": "要查的词"}},
                    "required": ["term"]},
        tags=frozenset({ToolTag.READ_ONLY}), domains=("slang",), hints=HINTS,
        visibility=Visibility.DEFERRED,
    )  # fmt: skip

    def __init__(self, store: SlangStore) -> None:
        self._store = store

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        term = simplified(str(arguments.get("term") or "")).strip().lower()[:32]
        if not term:
            raise ToolError("要说查哪个词")
        meanings = await self._store.meanings(context.conversation.stream_id)
        if term in meanings:
            return ToolOutput({"词": term, "意思": meanings[term], "说明": "这个群里的用法"})
        near = [t for t in meanings if term in t or t in term][:3]
        if near:
            return ToolOutput({"词": term, "相近的": {t: meanings[t] for t in near},
                               "说明": "没有这个词本身，这些是群里相近的说法"})  # fmt: skip
        return ToolOutput({"词": term, "意思": None, "说明": "这个群里还没学到这个词，不知道"})
