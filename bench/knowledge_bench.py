"""Knowledge benchmark: indexing throughput, search latency over 10,000 passages, and recall@5
of a written question set with the keyword index alone (docs/knowledge.md, "Measured").

A temporary folder gets the question set's documents (knowledge_questions.txt: twenty facts of
short guides, one a section, several with a rare exact term: a train number, a code, a name)
and enough filler documents to reach `--chunks` passages in all: Markdown of
headings and paragraphs from Chinese templates over varied word lists, so bigrams spread as in
real guides and the common ones are really common. A fresh SQLite database is migrated to head
and `FolderIndexer.scan` reads the folder the way the bot does (parse, chunk, index): timed,
reported as passages per second.

Then `--rounds` searches (after a few untimed ones) of `KnowledgeStore.search(q, ["", g], 5)`
with the question set's questions, and as many with questions of only common filler words
(which rightly find nothing): p50 / p99 of each, target p99 <= 20 ms (PASS or MISS).
Recall@5: a question is found when its fact's document and heading is among the five
passages returned; target >= 0.9. Each miss is printed with what came first instead.

Run from the repository root: `.venv/bin/python bench/knowledge_bench.py [--chunks 10000]
[--rounds 500] [--loop uvloop|asyncio]`. Exits 0 unless something fails; targets only print.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import pallas.features  # noqa: E402, F401  the features' tables on the metadata
from bench.loops import add_loop_option, pick_runner  # noqa: E402
from bench.machine import machine_line  # noqa: E402
from bench.stats import fmt, percentile, verdict  # noqa: E402
from pallas.product.knowledge.indexing import FolderIndexer  # noqa: E402
from pallas.product.knowledge.store import KnowledgeStore  # noqa: E402
from pallas.store.engine import create_engine  # noqa: E402
from pallas.store.migrate import upgrade_to_head  # noqa: E402

NOW = datetime(2026, 12, 6, tzinfo=UTC)
QUESTIONS = Path(__file__).with_name("knowledge_questions.txt")


def read_facts() -> list[tuple[str, str, str, str]]:
    """(document, heading, the fact, a question about it), from QUESTIONS."""
    rows = [line.split("|") for line in QUESTIONS.read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")]  # fmt: skip
    return [(doc, heading, fact, question) for doc, heading, fact, question in rows]


FACTS = read_facts()
PLACES = "青石 鹭岛 栖霞 西湖 断桥 逸夫 临江 白沙 望月 松涛 柳岸 桃源 云溪 石门 梅林".split()  # noqa: SIM905
THINGS = "集市 书房 公交 车站 图书馆 食堂 操场 花园 码头 广场 医院 银行 超市 影院 茶馆".split()  # noqa: SIM905
ACTIONS = "开放 关闭 维修 搬迁 扩建 打折 排队 举办活动 招募志愿者 调整时间".split()  # noqa: SIM905
TIMES = "周一 周二 周三 周四 周五 周末 上午 下午 晚上 月初 月底 春天 夏天 秋天 冬天".split()  # noqa: SIM905


def filler_paragraph(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(6, 10)):
        sentences.append(f"{rng.choice(PLACES)}的{rng.choice(THINGS)}{rng.choice(TIMES)}"
                         f"{rng.choice(ACTIONS)}，大家可以提前看看通知。")  # fmt: skip
    return "".join(sentences)


def write_folder(root: Path, chunks: int, rng: random.Random) -> None:
    root.mkdir(parents=True)
    by_doc: dict[str, list[tuple[str, str]]] = {}
    for doc, heading, fact, _ in FACTS:
        by_doc.setdefault(doc, []).append((heading, fact))
    for doc, sections in by_doc.items():
        body = "".join(f"\n## {h}\n\n{fact}\n\n{filler_paragraph(rng)}\n" for h, fact in sections)
        (root / doc).write_text(f"# {doc[:-3]}\n{body}", encoding="utf-8")
    per_file = 50
    for n in range(max(0, chunks - 2 * len(FACTS)) // per_file):
        sections = "".join(f"\n## 第{k}节\n\n{filler_paragraph(rng)}\n" for k in range(per_file))
        (root / f"filler-{n:04d}.md").write_text(f"# 杂记{n}\n{sections}", encoding="utf-8")


async def run(chunks: int, rounds: int) -> None:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "knowledge"
        write_folder(root, chunks, rng)
        engine = create_engine(f"sqlite+aiosqlite:///{Path(tmp) / 'kb.db'}")
        await upgrade_to_head(engine)
        store = KnowledgeStore(engine)
        started = time.perf_counter()
        report = await FolderIndexer(store, root, lambda: NOW).scan()
        spent = time.perf_counter() - started
        total = sum(d.chunks for d in await store.docs())
        print(f"indexed {report.indexed} documents, {total} passages in {spent:.1f} s: "
              f"{total / spent:.0f} passages/s")  # fmt: skip
        started = time.perf_counter()
        await store.warm()
        print(f"terms counted for the weights in {time.perf_counter() - started:.2f} s")
        await recall(store)
        await latency(store, rounds, rng)
        await engine.dispose()


async def recall(store: KnowledgeStore) -> None:
    found = 0
    for doc, heading, _, question in FACTS:
        passages = await store.search(question, ["", "123"], 5)
        hit = any(p.path == doc and p.heading.endswith(heading) for p in passages)
        found += hit
        if not hit:
            first = passages[0] if passages else None
            print(f"  miss: {question} -> {first.path if first else '-'} "
                  f"{first.heading if first else ''}")  # fmt: skip
    share = found / len(FACTS)
    print(f"recall@5: {found}/{len(FACTS)} = {share:.2f} (target >= 0.9) {verdict(share >= 0.9)}")


async def latency(store: KnowledgeStore, rounds: int, rng: random.Random) -> None:
    """The question set's questions (each finds its passage), and questions of only common
    filler words (each finds nothing worth it), timed apart."""
    facts = [q for *_, q in FACTS]
    common = [f"{rng.choice(PLACES)}的{rng.choice(THINGS)}什么时候{rng.choice(ACTIONS)}"
              for _ in range(50)]  # fmt: skip
    for name, questions in (("questions", facts), ("common words only", common)):
        for question in questions[:5]:
            await store.search(question, ["", "123"], 5)
        timings = []
        for n in range(rounds):
            started = time.perf_counter()
            await store.search(questions[n % len(questions)], ["", "123"], 5)
            timings.append((time.perf_counter() - started) * 1000)
        timings.sort()
        p99 = percentile(timings, 99)
        print(f"search, {name} ({rounds} rounds): p50 {fmt(percentile(timings, 50))} ms, "
              f"p99 {fmt(p99)} ms (target <= 20 ms) {verdict(p99 <= 20)}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=500)
    add_loop_option(parser)
    args = parser.parse_args()
    loop, runner = pick_runner(args.loop)
    print(machine_line("at start", loop))
    runner(run(args.chunks, args.rounds))
    print(machine_line("at end", loop))


if __name__ == "__main__":
    main()
