"""Learned lines benchmark: the answer lookup over a million pairs, and what the stage adds
to each inbound message.

Part 1 builds a SQLite store at the schema's head in a temporary data dir, fills
`classic_pair` with `--pairs` rows (default 1,000,000: 200,000 contexts with five answers
each, across 500 groups) and a few thousand bans, then times `LearnedStore.candidates` (the one
query the stage runs per message with a learnable line) for contexts that exist and contexts
that do not. Target: p99 <= 1 ms.

Part 2 builds an in-process `Runtime` with the classic feature, and times the `learned`
stage's `on_message` for group chatter (many members, many groups; every line learnable, so
each message pays a lookup and, after the first, a learn), beside the bot's recorded CPU per
inbound message in the ingress benchmark (5.37 ms, bench/README.md). Target: the stage's mean
<= 10 % of that.

Run from the repository root: `.venv/bin/python bench/classic_bench.py [--pairs N]
[--lookups N] [--messages N]`.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from loguru import logger  # noqa: E402

from bench.loops import add_loop_option, pick_runner  # noqa: E402
from bench.machine import machine_line  # noqa: E402
from bench.stats import percentile  # noqa: E402
from pallas.app import Runtime  # noqa: E402
from pallas.config import load_settings  # noqa: E402
from pallas.core.inbound import (  # noqa: E402
    InboundMessage,
    Segment,
    SegmentKind,
    Sender,
    StreamKey,
    StreamKind,
)
from pallas.product.classic.feature import EXTENSION as CLASSIC  # noqa: E402
from pallas.product.classic.lines import hashed  # noqa: E402
from pallas.product.classic.store import LearnedStore  # noqa: E402
from pallas.product.conversation.ingress import StoredMessage  # noqa: E402
from pallas.store.engine import create_engine  # noqa: E402
from pallas.store.migrate import upgrade_to_head  # noqa: E402

LOOKUP_TARGET_MS = 1.0
INGRESS_CPU_MS = 5.37  # bench/README.md: the bot's burst CPU per message, whole process tree
STAGE_SHARE = 0.10
GROUPS = 500
FLUSH_EVERY = 200  # messages between two flushes: about one a second at 200 messages/s
ANSWERS = 5


def fill(path: Path, pairs: int) -> int:
    """`pairs` rows in one transaction (sqlite3 directly: the store's own code is what is
    timed, not how the rows got there). The number of contexts."""
    contexts = pairs // ANSWERS
    now = datetime.now(UTC).isoformat()
    db = sqlite3.connect(path)
    rows = (
        (1 + (c % GROUPS), hashed(f"context {c}"), f"上下文{c}", hashed(f"answer {c} {a}"),
         f"回答{c}-{a}", '[{"kind": "text", "text": "好"}]', 1 + a, 1 + a % 3, now, now)
        for c in range(contexts)
        for a in range(ANSWERS)
    )  # fmt: skip
    db.executemany(
        "INSERT INTO classic_pair (stream_id, context_hash, context_text, answer_hash, "
        "answer_text, answer_segments, count, answerers, first_seen, last_seen) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    bans = ((1 + c % GROUPS, hashed(f"context {c}"), "x", hashed(f"answer {c} 0"), "x", 1, now)
            for c in range(0, contexts, 50))  # fmt: skip
    db.executemany(
        "INSERT INTO classic_ban (stream_id, context_hash, context_text, answer_hash, "
        "answer_text, banned_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        bans,
    )
    db.commit()
    db.close()
    return contexts


async def lookups(url: str, contexts: int, count: int) -> tuple[list[float], list[float]]:
    engine = create_engine(url)
    store = LearnedStore(engine)
    rng = random.Random(35)
    found, absent = [], []
    try:
        for _ in range(50):  # warm the connection and the pages
            await store.candidates(1, hashed(f"context {rng.randrange(contexts)}"))
        for i in range(count):
            c = rng.randrange(contexts)
            start = time.perf_counter()
            got = await store.candidates(1 + c % GROUPS, hashed(f"context {c}"))
            found.append((time.perf_counter() - start) * 1000)
            assert got, "a context that exists found nothing"
            start = time.perf_counter()
            await store.candidates(1, hashed(f"never said {i}"))
            absent.append((time.perf_counter() - start) * 1000)
    finally:
        await engine.dispose()
    return sorted(found), sorted(absent)


def chatter(count: int) -> list[StoredMessage]:
    out = []
    for i in range(count):
        stream = StreamKey("qq", "10000", StreamKind.GROUP, str(9000 + i % 20))
        text = f"第{i % 300}句话"  # contexts come back: lookups find pairs, learning recounts
        msg = InboundMessage(
            stream=stream, sender=Sender(user_id=str(20000 + i % 50)),
            platform_message_id=str(i), time=datetime.now(UTC),
            segments=(Segment(SegmentKind.TEXT, text=text),), text=text,
        )  # fmt: skip
        out.append(StoredMessage(i + 1, 1 + i % 20, 1 + i % 50, msg))
    return out


async def stage_cost(messages: int, data_dir: Path) -> tuple[list[float], float]:
    settings = load_settings(env_file=None, pallas_data_dir=data_dir)
    runtime = Runtime.build(settings, features=(CLASSIC,))
    await runtime.start()
    try:
        stage = next(s for s in runtime.conversation.stages.stages if s.name == "learned")
        learning = stage._parts.learning  # type: ignore[attr-defined]
        batch = chatter(messages)
        for stored in batch[:200]:  # warm: settings read once per group, first pairs
            await stage.on_message(stored)
        await learning.flush()  # their contexts are known: the timed lines are looked up
        samples = []
        cpu_start = time.process_time()
        for n, stored in enumerate(batch[200:], 1):
            start = time.perf_counter()
            await stage.on_message(stored)
            samples.append((time.perf_counter() - start) * 1000)
            if n % FLUSH_EVERY == 0:
                await learning.flush()  # the background flush, in the CPU it costs
        await learning.flush()
        cpu = (time.process_time() - cpu_start) * 1000 / max(1, len(batch) - 200)
    finally:
        await runtime.stop()
    return sorted(samples), cpu


async def run(pairs: int, count: int, messages: int, loop: str) -> None:
    print(machine_line("at start", loop))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "classic.db"
        url = f"sqlite+aiosqlite:///{path}"
        engine = create_engine(url)
        await upgrade_to_head(engine)
        await engine.dispose()
        started = time.perf_counter()
        contexts = fill(path, pairs)
        took = time.perf_counter() - started
        print(f"filled {pairs:,} pairs ({contexts:,} contexts) in {took:.1f} s")
        found, absent = await lookups(url, contexts, count)
        for label, samples in (("context found", found), ("context absent", absent)):
            p50, p99 = percentile(samples, 50), percentile(samples, 99)
            print(f"lookup, {label:<14} p50 {p50:.3f} ms  p99 {p99:.3f} ms  ({len(samples)})")
        worst = max(percentile(found, 99), percentile(absent, 99))
        verdict = "PASS" if worst <= LOOKUP_TARGET_MS else "MISS"
        print(f"target: lookup p99 <= {LOOKUP_TARGET_MS} ms: {verdict}")
        samples, cpu = await stage_cost(messages, Path(tmp) / "bot")
    mean = statistics.fmean(samples)
    budget = INGRESS_CPU_MS * STAGE_SHARE
    p50, p99 = percentile(samples, 50), percentile(samples, 99)
    print(f"learned stage per message: p50 {p50:.3f} ms, p99 {p99:.3f} ms, mean {mean:.3f} ms, "
          f"CPU (flushes included) {cpu:.3f} ms")  # fmt: skip
    verdict = "PASS" if cpu <= budget else "MISS"
    share = f"{STAGE_SHARE:.0%} of {INGRESS_CPU_MS} ms"
    print(f"target: stage CPU <= {share} = {budget:.3f} ms: {verdict}")
    print(machine_line("at end", loop))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--lookups", type=int, default=2_000)
    parser.add_argument("--messages", type=int, default=3_000)
    add_loop_option(parser)
    args = parser.parse_args()
    logger.remove()
    label, runner = pick_runner(args.loop)
    runner(run(args.pairs, args.lookups, args.messages, label))


if __name__ == "__main__":
    main()
