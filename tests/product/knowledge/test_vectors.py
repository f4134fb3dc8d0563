"""Vectors for the knowledge folder on the real store and a real model server: every passage
embedded once, the question's vector merged with the keywords so that a passage matching a
rare exact term stays first, and a failing embedding leaves the keywords to answer
(docs/knowledge.md, "Vectors")."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.knowledge.indexing import FolderIndexer
from pallas.product.knowledge.store import KnowledgeStore, Passage
from pallas.product.knowledge.tables import KnowledgeVector
from pallas.product.knowledge.vectors import KnowledgeVectors, fused
from pallas.providers.catalog import ModelType
from tests.providers.support import catalog, harness, model
from tests.support.fake_llm import FakeModelServer, Status

NOW = datetime(2026, 12, 6, tzinfo=UTC)


def passage(chunk_id: int, coverage: float) -> Passage:
    return Passage(chunk_id, "a.md", "", "text", 1.0, coverage, 2)


def test_strong_keyword_matches_stay_first_and_the_rest_is_fused() -> None:
    keyword = [passage(1, 0.9), passage(2, 0.2), passage(3, 0.1)]
    assert fused(keyword, [9, 3, 8], 4) == [1, 3, 9, 2]  # 3 is in both rankings
    assert fused(keyword, [], 5) == [1, 2, 3]
    assert fused([], [9, 8], 5) == [9, 8]


async def test_passages_embedded_once_and_merged_with_the_keywords(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    root = tmp_path / "knowledge"
    root.mkdir()
    (root / "train.md").write_text("# 交通\n\n去青石镇要坐 K7731 次列车。", encoding="utf-8")
    (root / "food.md").write_text("# 吃的\n\n青石镇的桂花糯米藕很好吃。\n\n# 住的\n\n"
                                  "镇上有三家客栈。", encoding="utf-8")  # fmt: skip
    store = KnowledgeStore(engine)
    await FolderIndexer(store, root, lambda: NOW).scan()
    async with FakeModelServer() as server:
        models = harness(catalog(server, [model("e", ModelType.EMBEDDING),
                                          model("c", ModelType.CHAT)])).manager  # fmt: skip
        vectors = KnowledgeVectors(engine, models, store)
        assert await vectors.fill() == 3
        assert await vectors.fill() == 0  # embedded once
        async with engine.connect() as conn:
            assert await conn.scalar(select(func.count()).select_from(KnowledgeVector)) == 3
        found = await vectors.search("K7731 次列车", [""], 3)
        assert found[0].path == "train.md" and len(found) == 3  # the rest come by vector
        server.default = Status(500)
        keyword_only = await vectors.search("K7731 次列车", [""], 3)
        assert [p.path for p in keyword_only] == ["train.md"]
        assert await vectors.search("K7731", ["999"], 3) == []  # another scope: nothing
