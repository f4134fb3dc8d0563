"""Retention benchmark: the hourly clean-up over a store of 1M messages while ingress writes.

Builds a fresh temporary SQLite database migrated to head: 50 groups, 2,000 people, then
`--messages` chat lines spread evenly over the last 365 days (sqlite3 `executemany` on the
migrated file, in the encodings SQLAlchemy uses, `PRAGMA synchronous=OFF` for the build only),
then the ledger a busy bot writes for them: per message an `inbound` event and a gate
decision (`gate_dropped` with its reason and payload), per 20 messages a turn's
`turn_started` / `turn_finished` and one `llm_call` row. The file size is read after the
messages and again after the ledger (WAL checkpointed), which gives the disk use per 100k
messages with and without the ledger.

Then the real job runs (`run_retention`, the default policy: messages 180 days, events 90,
model calls 90; at most 2,000 rows a batch, fewer while a batch holds the write lock over
100 ms; the run's 180 s budget, repeated as the hourly runs would
until nothing is due) while a steady ingress load writes new messages through the real
`TimelineWriter`, which shares the job's write lock, as in the bot. It reports per table the
rows deleted, the batches and rows/s; the longest a batch held the write lock; and the
ingress write latency (submit -> committed) p50 / p99 / max before the clean-up (the same load
alone) and during it. Target: the worst ingress write during the clean-up under 250 ms (a
batch is bounded, so ingress waits at most about one batch).

Run from the repository root: `.venv/bin/python bench/retention_bench.py [--messages 1000000]
[--rate 50] [--loop uvloop|asyncio]`. Exits 1 if a row that should stay is gone or one that
should go is left.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from sqlalchemy import func, insert, select  # noqa: E402
from sqlalchemy.ext.asyncio import AsyncEngine  # noqa: E402

from bench.loops import add_loop_option, pick_runner  # noqa: E402
from bench.machine import machine_line  # noqa: E402
from bench.stats import percentile, verdict  # noqa: E402
from pallas.core.inbound import (  # noqa: E402
    InboundMessage,
    Segment,
    SegmentKind,
    Sender,
    StreamKey,
    StreamKind,
)
from pallas.product.conversation.retention import (  # noqa: E402
    RetentionDeps,
    RetentionHolders,
    RetentionPolicy,
    RetentionReport,
    run_retention,
)
from pallas.product.memory.holds import memory_holds  # noqa: E402
from pallas.store.engine import create_engine  # noqa: E402
from pallas.store.migrate import upgrade_to_head  # noqa: E402
from pallas.store.models import Event, Identity, LlmCall, Message, Person, Stream  # noqa: E402
from pallas.store.retention import RetentionStore, outbox_holds  # noqa: E402
from pallas.store.timeline import TimelineWriter  # noqa: E402

NOW = datetime.now(UTC).replace(microsecond=0)
SPAN = timedelta(days=365)
GROUPS, PEOPLE, BOT_ID = 50, 2000, "10000"
CHUNK = 50_000
SQL_TIME = "%Y-%m-%d %H:%M:%S.%f"  # how SQLAlchemy stores a DateTime on SQLite
TARGET_WORST_MS = 250.0
WORDS = ["今天", "吃了", "什么", "哈哈", "有人", "打游戏"]
WORDS += ["吗", "明天", "上班", "好累", "晚安", "冲"]
MESSAGE_INSERT = (
    "INSERT INTO message (id, stream_id, sender_person_id, platform_message_id, time, "
    "stored_at, text, segments, reply_to, mentions, mentions_all, is_poke, from_bot, "
    "recalled, suppressed, truncated, turn_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, '[]', 0, 0, 0, 0, 0, 0, ?)"
)
EVENT_INSERT = (
    "INSERT INTO event (kind, turn_id, stream_id, person_id, message_id, reason, payload, "
    "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
CALL_INSERT = (
    "INSERT INTO llm_call (created_at, purpose, model_type, model, upstream_model, provider, "
    "stream_id, turn_id, prompt_tokens, completion_tokens, cached_tokens, usage_estimated, "
    "cost, latency_ms, outcome, error, attempt) "
    "VALUES (?, 'reply', 'chat', 'deepseek/chat', 'deepseek-chat', 'deepseek', ?, ?, 1400, 40, "
    "0, 0, 0.0012, 900.0, 'ok', '', 1)"
)
GATE_PAYLOAD = json.dumps({"rule": "no_trigger", "mentioned_me": False, "replies_in_window": 0})


def at(i: int, total: int) -> datetime:
    return NOW - SPAN + SPAN * (i / total)


async def small_tables(engine: AsyncEngine) -> None:
    then = NOW - SPAN - timedelta(days=1)
    streams = [
        {"id": s + 1, "platform": "qq", "self_id": BOT_ID, "kind": "group",
         "external_id": str(700_000 + s), "name": f"群{s}", "created_at": then}
        for s in range(GROUPS)
    ]  # fmt: skip
    people = [{"id": p + 1, "display_name": f"人{p}", "created_at": then} for p in range(PEOPLE)]
    ids = [
        {"id": p + 1, "platform": "qq", "user_id": str(20_000 + p), "person_id": p + 1,
         "nickname": f"人{p}", "created_at": then}
        for p in range(PEOPLE)
    ]  # fmt: skip
    async with engine.begin() as conn:
        await conn.execute(insert(Stream), streams)
        await conn.execute(insert(Person), people)
        await conn.execute(insert(Identity), ids)


def bulk(path: Path, statement: str, rows_of: object, total: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    started = time.perf_counter()
    try:
        conn.execute("PRAGMA synchronous=OFF")
        for start in range(0, total, CHUNK):
            conn.execute("BEGIN")
            conn.executemany(statement, rows_of(start, min(total, start + CHUNK)))  # type: ignore[operator]
            conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return time.perf_counter() - started


def message_rows(total: int, rng: random.Random) -> object:
    def rows(start: int, stop: int) -> list[tuple[object, ...]]:
        out = []
        for i in range(start, stop):
            text = "".join(rng.choices(WORDS, k=rng.randint(2, 8)))
            when = at(i, total).strftime(SQL_TIME)
            segments = json.dumps([Segment(SegmentKind.TEXT, text=text).to_json()])
            turn = i // 20 + 1 if i % 20 == 19 else None
            out.append((i + 1, i % GROUPS + 1, rng.randrange(PEOPLE) + 1, str(9_000_000_000 + i),
                        when, when, text, segments, turn))  # fmt: skip
        return out

    return rows


def event_rows(total: int) -> object:
    def rows(start: int, stop: int) -> list[tuple[object, ...]]:
        out = []
        for i in range(start, stop):
            when = at(i, total).strftime(SQL_TIME)
            stream, person = i % GROUPS + 1, i % PEOPLE + 1
            out.append(("inbound", None, stream, person, i + 1, "", "{}", when))
            out.append(("gate_dropped", None, stream, person, i + 1, "no_trigger", GATE_PAYLOAD,
                        when))  # fmt: skip
            if i % 20 == 19:
                turn = i // 20 + 1
                out.append(("turn_started", turn, stream, person, i + 1, "", "{}", when))
                out.append(("turn_finished", turn, stream, None, None, "reply", '{"ok": true}',
                            when))  # fmt: skip
        return out

    return rows


def call_rows(total: int) -> object:
    def rows(start: int, stop: int) -> list[tuple[object, ...]]:
        return [
            (at(i, total).strftime(SQL_TIME), i % GROUPS + 1, i // 20 + 1)
            for i in range(start, stop)
            if i % 20 == 19
        ]

    return rows


def file_bytes(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


@dataclass
class Built:
    messages_s: float
    ledger_s: float
    bytes_messages: int
    bytes_with_ledger: int
    events: int
    calls: int


async def build(engine: AsyncEngine, path: Path, total: int) -> Built:
    await upgrade_to_head(engine)
    await small_tables(engine)
    await engine.dispose()
    messages_s = bulk(path, MESSAGE_INSERT, message_rows(total, random.Random(5)), total)
    bytes_messages = file_bytes(path)
    ledger_s = bulk(path, EVENT_INSERT, event_rows(total), total)
    ledger_s += bulk(path, CALL_INSERT, call_rows(total), total)
    async with engine.connect() as conn:
        events = int(await conn.scalar(select(func.count()).select_from(Event)) or 0)
        calls = int(await conn.scalar(select(func.count()).select_from(LlmCall)) or 0)
    await engine.dispose()
    return Built(messages_s, ledger_s, bytes_messages, file_bytes(path), events, calls)


def inbound(n: int) -> InboundMessage:
    stream = StreamKey("qq", BOT_ID, StreamKind.GROUP, str(700_000 + n % GROUPS))
    text = f"新消息 {n}"
    return InboundMessage(
        stream=stream,
        sender=Sender(user_id=str(20_000 + n % PEOPLE), nickname="人"),
        platform_message_id=f"live-{n}",
        time=datetime.now(UTC),
        segments=(Segment(SegmentKind.TEXT, text=text),),
        text=text,
    )


class Ingress:
    """A steady load on an absolute schedule: each write timed from submit to commit."""

    def __init__(self, writer: TimelineWriter, rate: float) -> None:
        self._writer, self._gap = writer, 1.0 / rate
        self._sent = 0
        self.latencies: list[float] = []
        self._running = True

    async def run(self) -> None:
        start = time.perf_counter()
        pending: set[asyncio.Task[None]] = set()
        while self._running:
            due = start + self._sent * self._gap
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            task = asyncio.create_task(self._one(self._sent))
            pending.add(task)
            task.add_done_callback(pending.discard)
            self._sent += 1
        await asyncio.gather(*pending)

    async def _one(self, n: int) -> None:
        started = time.perf_counter()
        await self._writer.write(inbound(n))
        self.latencies.append((time.perf_counter() - started) * 1000)

    def take(self) -> list[float]:
        taken, self.latencies = sorted(self.latencies), []
        return taken

    def stop(self) -> None:
        self._running = False


async def prune(engine: AsyncEngine) -> tuple[list[RetentionReport], float]:
    holders = RetentionHolders()
    holders.hold("outbox", lambda: outbox_holds(engine))
    holders.hold("memory", lambda: memory_holds(engine))

    async def policy() -> RetentionPolicy:
        return RetentionPolicy()

    async def no_files(cutoff: datetime) -> int:
        return 0

    deps = RetentionDeps(RetentionStore(engine), holders, policy, no_files,
                         lambda: NOW)  # fmt: skip
    reports: list[RetentionReport] = []
    started = time.perf_counter()
    while not reports or not reports[-1].finished:
        reports.append(await run_retention(deps))
    return reports, time.perf_counter() - started


def latency_line(label: str, ms: list[float]) -> str:
    return (
        f"  {label:28} {len(ms):>6} writes  p50 {percentile(ms, 50):7.1f}  "
        f"p99 {percentile(ms, 99):7.1f}  max {(ms[-1] if ms else 0):7.1f} ms"
    )


async def check(engine: AsyncEngine, total: int, live: int) -> list[str]:
    cut = NOW - timedelta(days=180)
    async with engine.connect() as conn:
        old = await conn.scalar(select(func.count()).where(Message.time < cut))
        kept = await conn.scalar(select(func.count()).select_from(Message))
        events_old = await conn.scalar(
            select(func.count()).where(Event.created_at < NOW - timedelta(days=90))
        )
    expected = sum(1 for i in range(total) if at(i, total) >= cut) + live
    problems = []
    if old:
        problems.append(f"{old} messages older than the cutoff are left")
    if kept != expected:
        problems.append(f"{kept} messages kept, expected {expected}")
    if events_old:
        problems.append(f"{events_old} events older than the cutoff are left")
    return problems


async def main(args: argparse.Namespace, loop_name: str) -> int:
    print(machine_line("at start", loop_name))
    with tempfile.TemporaryDirectory(prefix="pallas-retention-") as tmp:
        path = Path(tmp) / "pallas.db"
        engine = create_engine(f"sqlite+aiosqlite:///{path}")
        built = await build(engine, path, args.messages)
        report_build(built, args.messages)
        writer = TimelineWriter(engine)
        writer.start()
        load = Ingress(writer, args.rate)
        loading = asyncio.create_task(load.run())
        await asyncio.sleep(args.baseline_s)
        alone = load.take()
        reports, seconds = await prune(engine)
        during = load.take()
        load.stop()
        await loading
        await writer.close()
        live = len(alone) + len(during) + len(load.take())
        problems = await check(engine, args.messages, live)
        await engine.dispose()
        report_prune(reports, seconds, alone, during, file_bytes(path))
    for problem in problems:
        print(f"WRONG: {problem}")
    print(f"\n{machine_line('at end', loop_name)}")
    return 1 if problems else 0


def report_build(built: Built, total: int) -> None:
    per = 100_000 / total
    print(f"\nbuild: {total:,} messages in {built.messages_s:.1f} s; ledger {built.events:,} "
          f"events + {built.calls:,} model calls in {built.ledger_s:.1f} s")  # fmt: skip
    print(f"disk per 100k messages: {built.bytes_messages * per / 2**20:.1f} MiB without the "
          f"ledger, {built.bytes_with_ledger * per / 2**20:.1f} MiB with it "
          f"(file {built.bytes_with_ledger / 2**20:.0f} MiB)")  # fmt: skip


def report_prune(
    reports: list[RetentionReport], seconds: float, alone: list[float], during: list[float],
    size: int,
) -> None:  # fmt: skip
    print(f"\nclean-up: {len(reports)} runs, {seconds:.1f} s")
    tables: dict[str, list[float]] = {}
    for report in reports:
        for p in report.passes:
            row = tables.setdefault(p.table, [0, 0, 0.0])
            row[0] += p.deleted
            row[1] += p.batches
            row[2] = max(row[2], p.longest_batch_s)
    for table, (deleted, batches, longest) in tables.items():
        print(f"  {table:10} {int(deleted):>9,} rows in {int(batches):>5} batches; "
              f"longest batch {longest * 1000:6.1f} ms")  # fmt: skip
    total = sum(int(row[0]) for row in tables.values())
    print(f"  all tables {total:>9,} rows, {total / seconds:,.0f} rows/s")
    print(latency_line("ingress alone", alone))
    print(latency_line("ingress during clean-up", during))
    worst = during[-1] if during else 0.0
    print(f"worst ingress write during clean-up {worst:.1f} ms (target < {TARGET_WORST_MS:.0f} "
          f"ms): {verdict(worst < TARGET_WORST_MS)}")  # fmt: skip
    print(f"file after the clean-up {size / 2**20:.0f} MiB (freed pages are reused, not returned)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=50.0, help="ingress messages per second")
    parser.add_argument("--baseline-s", type=float, default=10.0)
    add_loop_option(parser)
    options = parser.parse_args()
    name, run = pick_runner(options.loop)
    sys.exit(run(main(options, name)))
