"""The knowledge folder on the real store: documents read, chunked under their headings,
found by a question (rare exact terms first), one group's never reaching another; and the
bad input: a binary named .md, GBK, a symlink out of the folder, a twin, a file too big,
a PDF without text, a file changed between scans (docs/knowledge.md)."""

from __future__ import annotations

import io
import os
from datetime import UTC, datetime
from pathlib import Path

from pypdf import PdfWriter
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.knowledge.chunking import CHUNK_CHARS, chunk_document
from pallas.product.knowledge.indexing import FolderIndexer, ScanReport
from pallas.product.knowledge.parsing import MAX_FILE_BYTES
from pallas.product.knowledge.store import KnowledgeStore

NOW = datetime(2026, 12, 6, 4, 0, tzinfo=UTC)
TOWN = """# 嗯哼镇

## 风物

嗯哼镇的镇花是紫色的曼陀罗，每年三月十七日开花。

## 交通

去嗯哼镇要坐 K31415 次列车，在青石站下车。
"""


def test_chunks_keep_their_headings_and_size() -> None:
    chunks = chunk_document(TOWN + "\n## 长文\n\n" + "很长的一句话。" * 300)
    assert chunks[0].heading == "嗯哼镇 › 风物" and "曼陀罗" in chunks[0].text
    assert chunks[1].heading == "嗯哼镇 › 交通"
    assert all(len(c.text) <= CHUNK_CHARS for c in chunks)
    assert {c.heading for c in chunks[2:]} == {"嗯哼镇 › 长文"}


async def test_a_folder_indexed_and_searched_within_its_scopes(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    root = tmp_path / "knowledge"
    (root / "700").mkdir(parents=True)
    (root / "town.md").write_text(TOWN, encoding="utf-8")
    (root / "700" / "secret.md").write_text("# 七百群\n\n暗号是蓝色的长颈鹿。", encoding="utf-8")
    (root / "gbk.txt").write_bytes("青石站的站长姓欧阳。".encode("gbk"))
    (root / "fake.md").write_bytes(b"\x00\x01binary" * 100)
    (root / "twin.md").write_text(TOWN, encoding="utf-8")
    (root / "empty.pdf").write_bytes(blank_pdf())
    (root / "huge.txt").write_bytes(b"a" * (MAX_FILE_BYTES + 1))
    outside = tmp_path / "outside.md"
    outside.write_text("外面的秘密", encoding="utf-8")
    os.symlink(outside, root / "link.md")
    store = KnowledgeStore(engine)
    indexer = FolderIndexer(store, root, lambda: NOW)
    report = await indexer.scan()
    assert (report.indexed, report.skipped) == (3, 5)
    reasons = {d.path: d.reason for d in await store.docs()}
    assert "不是文本" in reasons["fake.md"] and "town.md" in reasons["twin.md"]
    assert "扫描件" in reasons["empty.pdf"] and "太大" in reasons["huge.txt"]
    assert "外面" in reasons["link.md"]

    [best, *_] = await store.search("K31415 次列车在哪下车", [""])
    assert best.path == "town.md" and best.heading == "嗯哼镇 › 交通"
    assert (await store.search("青石站的站长", [""]))[0].path == "gbk.txt"
    assert await store.search("暗号是什么", [""]) == []  # group 700's: not every chat's
    assert (await store.search("暗号是什么", ["", "700"]))[0].path == "700/secret.md"
    assert await store.search("暗号是什么", ["", "800"]) == []  # another group's: never

    assert await indexer.scan() == ScanReport()  # nothing changed: nothing indexed again
    (root / "town.md").write_text(TOWN.replace("曼陀罗", "鸢尾"), encoding="utf-8")
    (root / "gbk.txt").unlink()
    assert await indexer.scan() == ScanReport(indexed=2, skipped=0, dropped=1)  # +the twin
    assert "鸢尾" in (await store.search("镇花", [""]))[0].text


def blank_pdf() -> bytes:
    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
