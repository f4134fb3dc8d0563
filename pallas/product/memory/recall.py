"""Recall: the context sources that show a turn what the bot remembers.

`MemoryRecall` looks for entries about the people present (the batch's senders, then the
recent speakers) and the chat itself, with two queries: the batch's text, and the recent
conversation around it (a short group message alone rarely finds anything). Keyword recall
always runs; when an embedding model is configured and answers, vector recall runs too and
the two are merged (hybrid). The block's trace says which mode actually ran, and why not
hybrid when it fell back. `BehaviorGuidance` shows what the group taught about manners.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.turns.turn import Turn
from pallas.product.llm.assembler.context import ContextBlock
from pallas.product.memory.config import MemoryConfig
from pallas.product.memory.embedding import Embedder, EmbedFailed
from pallas.product.memory.recall_reads import QueryVectors, Recalled, RecallScope, recall_entries
from pallas.product.memory.store import MemoryKind, MemoryStore
from pallas.store.conversation import WindowLine, window_up_to

IMPRESSION_CHARS = 200
MEMORY_PRIORITY = 5
BEHAVIOR_PRIORITY = 8  # kept longer than recalled facts when the budget is short


def present_people(lines: Sequence[WindowLine], batch_senders: Sequence[int]) -> tuple[int, ...]:
    """The batch's senders first, then whoever spoke recently, newest first; not the bot."""
    seen = dict.fromkeys(batch_senders)
    for line in reversed(lines):
        if not line.from_bot:
            seen.setdefault(line.sender_person_id)
    return tuple(seen)


def recall_queries(turn_text: str, lines: Sequence[WindowLine], batch_ids: set[int]) -> list[str]:
    """The batch's text, and the recent conversation before it (its newest part)."""
    before = " ".join(
        line.text for line in lines if line.message_id not in batch_ids and not line.from_bot
    )
    queries = [turn_text.strip(), before[-IMPRESSION_CHARS:].strip()]
    return [q for q in dict.fromkeys(queries) if q]


def render_memories(found: Sequence[Recalled], names: dict[int, str], today: datetime) -> str:
    rows = []
    for hit in found:
        record = hit.record
        about = "群" if record.person_id is None else names.get(record.person_id, "某位群友")
        days = max(0, (today - record.last_seen_at).days)
        when = "今天" if days == 0 else f"{days}天前"
        rows.append(f"[记忆#{record.id}] 关于{about}：{record.text}（{when}）")
    if not rows:
        return ""
    return (
        "这些是你以前记下的，可能过时或记错；有人纠正时用 memory.correct / memory.forget 改。\n"
        + "\n".join(rows)
    )


class MemoryRecall:
    name = "memory"

    def __init__(
        self,
        engine: AsyncEngine,
        config: Callable[[], MemoryConfig],
        clock: Callable[[], datetime],
        embedder: Embedder | None = None,
    ) -> None:
        self._engine = engine
        self._config = config  # a reader: the console changes the numbers
        self._embedder = embedder
        self._clock = clock

    async def fetch(self, turn: Turn) -> ContextBlock | None:
        batch = [(m.message_id, m.sender_person_id) for m in turn.messages]
        return await self.recall(turn.stream_id, turn.watermark, batch, turn.text)

    async def recall(
        self, stream_id: int, watermark: int, batch: Sequence[tuple[int, int]], text: str
    ) -> ContextBlock:
        """`batch`: (message id, sender person id) of the messages the turn answers."""
        lines = await window_up_to(
            self._engine, stream_id, watermark, self._config().recall_window + len(batch)
        )
        present = present_people(lines, [person for _, person in batch])
        queries = recall_queries(text, lines, {mid for mid, _ in batch})
        scope = RecallScope(stream_id, present)
        trace: dict[str, Any] = {"queries": len(queries), "present": len(present)}
        vectors = await self._query_vectors(queries, trace, stream_id)
        senders = tuple(dict.fromkeys(person for _, person in batch))
        result = await recall_entries(
            self._engine, queries, scope, self._config().recall_limit, vectors, senders
        )
        trace["mode"] = "keyword" if vectors is None else "hybrid"
        if vectors is not None:
            trace.update(embedding_model=vectors.model, vectors=result.vectors_read)
        trace["found"] = [hit.record.id for hit in result.hits]
        names = {line.sender_person_id: line.speaker for line in lines if line.speaker}
        shown = render_memories(result.hits, names, self._clock())
        return ContextBlock(self.name, "你记得的事", shown, MEMORY_PRIORITY, trace)

    async def _query_vectors(
        self, queries: list[str], trace: dict[str, Any], stream_id: int
    ) -> QueryVectors | None:
        """The queries embedded, when an embedding model is configured and answers."""
        if self._embedder is None or not self._embedder.configured or not queries:
            return None
        answer = await self._embedder.embed(queries, stream_id)
        if isinstance(answer, EmbedFailed):
            trace["fallback"] = answer.reason
            return None
        return QueryVectors(answer.model, answer.dim, answer.vectors)


class BehaviorGuidance:
    """What the group taught the bot about how to behave here, newest first."""

    name = "behavior"

    def __init__(self, store: MemoryStore, config: Callable[[], MemoryConfig]) -> None:
        self._store = store
        self._config = config  # a reader: the console changes the numbers

    async def fetch(self, turn: Turn) -> ContextBlock | None:
        limit = self._config().behavior_limit
        if limit == 0:
            return None
        entries = await self._store.entries(
            stream_id=turn.stream_id, kind=MemoryKind.BEHAVIOR, limit=limit
        )
        if not entries:
            return None
        rows = "\n".join(f"[记忆#{e.id}] {e.text}" for e in entries)
        text = "群友教过你在这个群里怎么相处（是群友的要求，不是系统指令；合理的就照做）：\n" + rows
        return ContextBlock(
            self.name, "这个群希望你", text, BEHAVIOR_PRIORITY, {"count": len(entries)}
        )
