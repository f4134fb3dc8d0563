"""Recall for a turn on a real store: who is present, the two queries, keyword by default,
hybrid only when the embedding model answers, and a fall back to keywords (named in the
trace) when it times out, fails or answers with another size."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.vectors import pack, top_by_cosine
from pallas.product.memory.config import MemoryConfig
from pallas.product.memory.embedding import Embedder
from pallas.product.memory.recall import (
    MemoryRecall,
    present_people,
    recall_queries,
)
from pallas.product.memory.store import MemoryKind, MemoryStore, NewMemory
from pallas.providers.catalog import ModelType
from pallas.store.conversation import WindowLine
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.providers.support import catalog, harness, model
from tests.support.fake_llm import EMBEDDING_DIMENSIONS, FakeModelServer, Stall, Status
from tests.support.inbound import group, message

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
EMBED = "emb"


def line(mid: int, person: int, text: str = "", from_bot: bool = False) -> WindowLine:
    return WindowLine(mid, str(mid), person, f"p{person}", str(person), from_bot, text, NOW, None,
                      False, False)  # fmt: skip


def test_present_people_are_the_batch_senders_then_the_recent_speakers() -> None:
    lines = [line(1, 5), line(2, 6), line(3, 99, from_bot=True), line(4, 7), line(5, 6)]
    assert present_people(lines, [7]) == (7, 6, 5)


def test_the_two_queries_are_the_batch_and_what_was_said_before() -> None:
    lines = [
        line(1, 5, "周末去爬山吗"),
        line(2, 99, "好呀", from_bot=True),
        line(3, 6, "我爱吃什么"),
    ]
    assert recall_queries("我爱吃什么", lines, {3}) == ["我爱吃什么", "周末去爬山吗"]
    assert recall_queries("一样", [line(1, 5, "一样")], {1}) == ["一样"]  # deduplicated


def test_cosine_picks_the_nearest_and_skips_another_size() -> None:
    rows = [("a", pack([1.0, 0.0])), ("b", pack([0.0, 1.0])), ("c", pack([1.0, 0.0, 0.0]))]
    assert top_by_cosine([0.9, 0.1], rows, 5)[0][0] == "a"
    assert [item for item, _ in top_by_cosine([0.9, 0.1], rows, 5)] == ["a", "b"]


@dataclass
class Room:
    engine: AsyncEngine
    store: MemoryStore
    server: FakeModelServer
    ming: MessageWritten
    hong: MessageWritten

    def recall(self, embedder: Embedder | None = None) -> MemoryRecall:
        return MemoryRecall(self.engine, MemoryConfig, lambda: NOW, embedder)

    def embedder(self, timeout_s: float = 2.0) -> Embedder:
        models = harness(
            catalog(
                self.server,
                [model(EMBED, ModelType.EMBEDDING), model("chat")],
                timeout_s=timeout_s,
            )
        ).manager
        return Embedder(models, self.store, self.engine, lambda: timeout_s)

    async def ask(self, recall: MemoryRecall, text: str) -> tuple[str, dict[str, object]]:
        block = await recall.recall(
            self.ming.stream_id,
            self.hong.message_id,
            [(self.hong.message_id, self.hong.person_id)],
            text,
        )
        return block.text, dict(block.trace)


@pytest.fixture
async def room(
    engine: AsyncEngine, writer: TimelineWriter, model_server: FakeModelServer
) -> AsyncIterator[Room]:
    ming = await writer.write(message("我周末想去爬山", stream=group("r"), user_id="42"))
    hong = await writer.write(message("我爱吃什么", stream=group("r"), user_id="43"))
    assert isinstance(ming, MessageWritten) and isinstance(hong, MessageWritten)
    store = MemoryStore(engine)
    facts = [
        NewMemory(MemoryKind.FACT, hong.stream_id, hong.person_id, "小红喜欢吃榴莲", "test"),
        NewMemory(MemoryKind.FACT, hong.stream_id, ming.person_id, "小明周末常去爬山", "test"),
        NewMemory(MemoryKind.FACT, hong.stream_id, None, "本群每周五晚上开黑", "test"),
    ]
    await store.remember(facts, NOW, actor="test")
    yield Room(engine, store, model_server, ming, hong)


async def test_keyword_recall_without_an_embedding_model(room: Room) -> None:
    text, trace = await room.ask(room.recall(), "我爱吃什么")
    # The batch asks about eating; the line before it (Ming on hiking) finds Ming's fact.
    assert "小明周末常去爬山" in text
    assert trace["mode"] == "keyword"
    assert "fallback" not in trace


async def test_the_speakers_own_facts_come_even_without_a_shared_word(room: Room) -> None:
    text, trace = await room.ask(room.recall(), "你还记得我吗")
    assert "小红喜欢吃榴莲" in text  # Hong asks: her own fact
    assert "本群每周五晚上开黑" not in text  # no word shared, not about the speaker
    assert trace["mode"] == "keyword"


async def test_the_chats_latest_episode_comes_when_there_is_room(room: Room) -> None:
    episodes = [
        NewMemory(MemoryKind.EPISODE, room.ming.stream_id, None, "上周大家一起策划了露营", "test"),
        NewMemory(MemoryKind.EPISODE, room.ming.stream_id, None, "昨天群里为猫狗吵了一架", "test"),
    ]
    await room.store.remember(episodes[:1], NOW, actor="test")
    await room.store.remember(episodes[1:], NOW + timedelta(hours=1), actor="test")
    text, _ = await room.ask(room.recall(), "你还记得我吗")
    assert "昨天群里为猫狗吵了一架" in text  # the newest episode, no word shared
    assert "上周大家一起策划了露营" not in text


async def test_hybrid_when_the_embedding_model_answers(room: Room) -> None:
    embedder = room.embedder()
    for entry in await room.store.entries():
        await embedder.embed_entries([entry.id])
    text, trace = await room.ask(room.recall(embedder), "我爱吃什么")
    assert trace["mode"] == "hybrid"
    assert trace["embedding_model"] == EMBED and trace["vectors"] == 3
    assert text  # the keyword hits are still there


@pytest.mark.parametrize(
    ("answer", "reason"),
    [(Stall(), "no answer within"), (Status(500), "server_error")],
)
async def test_a_failing_embedding_service_falls_back_to_keywords(
    room: Room, answer: Stall | Status, reason: str
) -> None:
    room.server.script(f"up-{EMBED}", answer)
    text, trace = await room.ask(room.recall(room.embedder(timeout_s=0.5)), "我爱吃什么")
    assert trace["mode"] == "keyword"
    assert reason in str(trace["fallback"])
    assert "小明周末常去爬山" in text


async def test_an_answer_of_another_size_falls_back_to_keywords(room: Room) -> None:
    [entry, *_] = await room.store.entries()
    wrong = EMBEDDING_DIMENSIONS + 4
    await room.store.set_embedding(entry.id, EMBED, pack([0.5] * wrong), wrong)
    _, trace = await room.ask(room.recall(room.embedder()), "我爱吃什么")
    assert trace["mode"] == "keyword"
    assert f"answered {EMBEDDING_DIMENSIONS} dimensions, stored vectors have {wrong}" in str(
        trace["fallback"]
    )
