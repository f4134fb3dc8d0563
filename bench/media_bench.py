"""Media benchmark: the sticker-habit scan over a large timeline; what a picture adds to ingress.

Part `habit`. A fresh SQLite file is migrated to head, then filled through the plain `sqlite3`
module (one connection, `executemany` in chunks of 10,000 rows, values written in the formats
SQLAlchemy reads back: `YYYY-MM-DD HH:MM:SS.ffffff` for times, `json.dumps` for JSON, 0/1 for
booleans): 20 group streams, 500 people plus the bot, and `--messages` messages whose times rise
with their id over the last 30 days (up to an hour ago); 1 % of the text lines are the bot's. Of the
people's messages, `--images` carry one image segment shaped as the media pipeline leaves it
(`{"kind": "image", "text": "[动画表情]", "media": {"url": ..., "asset": "asset:ab/<sha>.png"},
"raw_type": "image"}`): half are stickers (`[动画表情]`), half ordinary pictures (`[图片]`, which
the scan must not count), their hashes drawn from a pool of 2,000. The fill is timed apart and
is not part of the target. Then the whole timeline is scanned the way the job
`stickers.habit_scan` does it: `StickerHabitStore.scan_step(CURSOR, until, STEP)` in a loop until
a step says `done`, `until` being now minus the job's settle time (the job stops after
`MAX_STEPS` steps and goes on at its next run; the loop here does not, and says how many runs
the job would need). Wall and process CPU time (`time.process_time`, so the driver's thread is
included), messages/s, the wall time of one step (p50, p99, max: one transaction, which in the
bot holds the store's write lock, so timeline commits wait behind it), and the stickers
counted, checked against the stickers inserted (in the scan's own total and in `sticker_use`).
Target: a full scan of 1,000,000 messages with 100,000 images in at most 30 s (PASS or MISS).
Then `--increment` newer messages (10 % images, half of them stickers) are added and scanned the
same way: time per new row against the full scan's, which shows whether the scan's cost follows
the rows after its cursor or the size of the timeline. The query plan of a step's read is
printed under the figures.

Part `ingress`. What an image message costs the ingress path, against a text message, in
process. A `Runtime` is built on a fresh temporary data dir the way `bot.py` builds it
(`Runtime.build`, then `start`), with a turn handler that does nothing (no agent, no model), the
gate's ambient lottery off (probability 0: a turn's cost would land on whichever kind drew it;
the `turns` column shows none ran), and what the plugin packages add to the stage list: the
responders' stages (`repeat`, `poke_back`, `notices`) and media, installed through the feature
seam exactly as `bot.py` installs them (the `media` stage and the real `media.fetch` handler
among the rest). Everything `start` does runs except the job worker: `Jobs.start` is replaced by
a no-op on this runtime, so the `media.fetch` jobs the media stage enqueues are committed and
never run, and nothing is downloaded (the URLs point at 127.0.0.1:9 anyway); the run checks that
every job is still pending and no file was kept. No NoneBot, no WebSocket: each message is a
NapCat-shaped OneBot frame parsed by the adapter's `json_to_event` beforehand (not timed), then
timed as the ingress hook runs it: `translate_event`, then `runtime.conversation.ingress.accept`
(the timeline's commit, then the stage list: silence, commands, poke_back, notices, repeat,
media, gate). Not included: NoneBot's dispatch after the hook, the hook's look-up of unknown
@-mentioned members (none here), and of course the fetch itself. Messages go one at a time (each
`accept` awaited before the next; the media stage's enqueue, a task of its own, may overlap the
next message), after an untimed warm-up in which every (group, sender) pair has spoken once in
text and once with a sticker. Three kinds, `--count` messages each, in 10 rounds of one block
per kind (the order rotated each round and reversed every other one, so the slow drift of a run,
the gate's activity views growing, falls on every kind alike): distinct chat lines; one sticker
each, of a distinct file, so the repeater never fires; and the same stickers with the media
stage switched off in its slot, which separates what the fetch job's enqueue costs from what an
image segment costs anyway. CPU per message is the process CPU (`time.process_time`, all
threads) of a block, until the block's enqueue tasks and ledger events are committed, divided by
its messages. Target: "an image message's ingress cost unchanged", read as CPU per image message
<= 1.15x per text message (PASS or MISS). The wall time of each message on the path (translate
and `accept`) is printed too: p50, p99, mean.

Run from the repository root: `.venv/bin/python bench/media_bench.py [habit|ingress|all]
[--messages 1000000] [--images 100000] [--increment 10000] [--count 2000]
[--loop uvloop|asyncio]`. Exits 1 if the stickers counted differ from those inserted, or if a
fetch job ran or is missing; the targets only print.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from nonebot.adapters.onebot.v11 import Event  # noqa: E402
from sqlalchemy import event  # noqa: E402
from sqlalchemy.ext.asyncio import AsyncEngine  # noqa: E402

from bench.logs import capture_warnings, print_logged  # noqa: E402
from bench.loops import Runner, add_loop_option, pick_runner  # noqa: E402
from bench.machine import machine_line  # noqa: E402
from bench.stats import fmt, percentile, verdict  # noqa: E402
from pallas.app import KernelConfig, Runtime  # noqa: E402
from pallas.config import load_settings  # noqa: E402
from pallas.core.assets import ASSETS_FOLDER  # noqa: E402
from pallas.core.inbound import InboundMessage  # noqa: E402
from pallas.platform.onebot.adapter import PallasOneBotAdapter  # noqa: E402
from pallas.platform.onebot.translate import translate_event  # noqa: E402
from pallas.product.conversation.gate.policy import GatePolicy  # noqa: E402
from pallas.product.conversation.ingress import CONTINUE, StageResult, StoredMessage  # noqa: E402
from pallas.product.conversation.turns.turn import NoTurnHandler  # noqa: E402
from pallas.product.deterministic.extension import EXTENSION as RESPONDERS  # noqa: E402
from pallas.product.media.feature import EXTENSION as MEDIA  # noqa: E402
from pallas.product.media.fetching import FETCH_KIND, MediaStage  # noqa: E402
from pallas.product.media.habit_store import StickerHabitStore  # noqa: E402
from pallas.product.media.sticker_habit import CURSOR, MAX_STEPS, SETTLE, STEP  # noqa: E402
from pallas.store.engine import create_engine  # noqa: E402
from pallas.store.migrate import upgrade_to_head  # noqa: E402

SEED = 17
GROUPS = 20
PEOPLE = 500
BOT_PERSON = PEOPLE + 1
BOT_SHARE = 0.01  # of the text lines: the bot's own (never counted)
HASHES = 2_000
STICKER_SHARE = 0.5  # of the image messages
INCREMENT_IMAGE_SHARE = 0.1
CHUNK = 10_000
DAYS = 30
STICKER_LABEL = "[动画表情]"  # the placeholders ingress gives NapCat's images
PICTURE_LABEL = "[图片]"
HABIT_TARGET_S = 30.0
HABIT_TARGET_MESSAGES = 1_000_000
RATIO_TARGET = 1.15
PROGRESS_STEPS = 100
SELF_ID = 10000
INGRESS_GROUPS = 20
INGRESS_SENDERS = 50
UNREACHABLE = "http://127.0.0.1:9"
LINES = (
    "今天吃什么",
    "晚上一起打游戏吗",
    "哈哈哈哈笑死",
    "这个我也不知道",
    "明天要上班了好累",
    "刚下班，路上好堵",
    "周末去爬山吧",
    "这家店的奶茶不错",
    "我先去洗澡了",
    "有人看昨天的比赛吗",
)


def utc_now() -> datetime:
    return datetime.now(UTC)


# Part 1: the timeline ------------------------------------------------------------------------


def sql_time(moment: datetime) -> str:
    """A UTC time as SQLAlchemy stores it in SQLite (naive, microseconds always written)."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def image_json(sha: str, label: str) -> str:
    segment = {
        "kind": "image",
        "text": label,
        "media": {"url": "http://x/y", "asset": f"asset:{sha[:2]}/{sha}.png"},
        "raw_type": "image",
    }
    return json.dumps([segment])


@dataclass(frozen=True)
class Pools:
    hashes: list[str]
    texts: list[tuple[str, str]]  # (text, segments JSON)
    stickers: list[str]  # segments JSON, by hash index
    pictures: list[str]


def make_pools(rng: random.Random) -> Pools:
    hashes = [rng.randbytes(32).hex() for _ in range(HASHES)]
    texts = []
    for n in range(500):
        line = f"{rng.choice(LINES)} {n}"
        texts.append((line, json.dumps([{"kind": "text", "text": line}])))
    return Pools(
        hashes,
        texts,
        [image_json(sha, STICKER_LABEL) for sha in hashes],
        [image_json(sha, PICTURE_LABEL) for sha in hashes],
    )


@dataclass
class Expected:
    """What the scan must find: the stickers inserted, and their distinct keys."""

    stickers: int = 0
    keys: set[tuple[int, int, str]] = field(default_factory=set)
    images: int = 0


@dataclass(frozen=True)
class Span:
    start: datetime
    end: datetime
    first_id: int  # platform ids go on from here


def message_row(
    n: int, moment: datetime, image: bool, pools: Pools, rng: random.Random, seen: Expected
) -> tuple[Any, ...]:
    stream = 1 + rng.randrange(GROUPS)
    person = 1 + rng.randrange(PEOPLE)
    from_bot = not image and rng.random() < BOT_SHARE
    if from_bot:
        person = BOT_PERSON
    text, segments = rng.choice(pools.texts)
    if image:
        index = rng.randrange(HASHES)
        sticker = rng.random() < STICKER_SHARE
        text = STICKER_LABEL if sticker else PICTURE_LABEL
        segments = (pools.stickers if sticker else pools.pictures)[index]
        seen.images += 1
        if sticker:
            seen.stickers += 1
            seen.keys.add((stream, person, pools.hashes[index]))
    stamp = sql_time(moment)
    return (stream, person, str(n), stamp, stamp, text, segments, "[]", from_bot)


INSERT_MESSAGE = (
    "INSERT INTO message (stream_id, sender_person_id, platform_message_id, time, stored_at, "
    "text, segments, reply_to, mentions, mentions_all, is_poke, from_bot, recalled, suppressed, "
    "truncated, turn_id) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, 0, 0, ?, 0, 0, 0, NULL)"
)


def insert_people(db: sqlite3.Connection, now: datetime) -> None:
    stamp = sql_time(now)
    streams = [
        (s, "qq", str(SELF_ID), "group", str(700_000 + s), f"测试群{s}", stamp)
        for s in range(1, GROUPS + 1)
    ]
    people = [(p, f"群友{p}", stamp) for p in range(1, BOT_PERSON + 1)]
    db.executemany(
        "INSERT INTO stream (id, platform, self_id, kind, external_id, name, created_at, "
        "via_group) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
        streams,
    )
    db.executemany("INSERT INTO person (id, display_name, created_at) VALUES (?, ?, ?)", people)
    db.commit()


def insert_messages(
    db: sqlite3.Connection,
    span: Span,
    count: int,
    images: set[int],
    rng: random.Random,
    pools: Pools,
) -> Expected:
    seen = Expected()
    spacing = (span.end - span.start) / max(count, 1)
    for start in range(0, count, CHUNK):
        rows = [
            message_row(span.first_id + i, span.start + spacing * i, i in images, pools, rng, seen)
            for i in range(start, min(start + CHUNK, count))
        ]
        db.executemany(INSERT_MESSAGE, rows)
        db.commit()
        if (start // CHUNK) % 20 == 19:
            print(f"  fill: {start + len(rows):,} / {count:,} messages", flush=True)
    return seen


@contextmanager
def plain_connection(path: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(path)
    db.execute("PRAGMA synchronous=OFF")  # a throwaway file: the fill is not what is measured
    try:
        yield db
    finally:
        db.close()


@dataclass(frozen=True)
class Filled:
    seconds: float
    expected: Expected


def fill(path: Path, span: Span, count: int, image_count: int, rng: random.Random) -> Filled:
    t0 = time.perf_counter()
    pools = make_pools(rng)
    images = set(rng.sample(range(count), min(image_count, count)))
    with plain_connection(path) as db:
        if span.first_id == 0:
            insert_people(db, span.end)
        expected = insert_messages(db, span, count, images, rng, pools)
    return Filled(time.perf_counter() - t0, expected)


# Part 1: the scan ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanRun:
    wall_s: float
    cpu_s: float
    steps: int
    messages: int
    stickers: int
    step_ms: list[float]  # wall time of each step (one transaction), sorted


async def scan(engine: AsyncEngine, until: datetime, progress: bool) -> ScanRun:
    """As the job does it, but on until `done` (the job stops after MAX_STEPS)."""
    store = StickerHabitStore(engine)
    messages = stickers = 0
    step_ms: list[float] = []
    cpu0, t0 = time.process_time(), time.perf_counter()
    while True:
        start = time.perf_counter()
        step = await store.scan_step(CURSOR, until, STEP)
        step_ms.append((time.perf_counter() - start) * 1000)
        messages, stickers = messages + step.messages, stickers + step.stickers
        if progress and len(step_ms) % PROGRESS_STEPS == 0:
            print(
                f"  scan: {messages:,} messages after {time.perf_counter() - t0:.1f} s", flush=True
            )
        if step.done:
            break
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return ScanRun(wall, cpu, len(step_ms), messages, stickers, sorted(step_ms))


@dataclass(frozen=True)
class Stored:
    rows: int
    total: int


def stored_counts(path: Path) -> Stored:
    db = sqlite3.connect(path)
    try:
        rows, total = db.execute(
            "SELECT count(*), coalesce(sum(count), 0) FROM sticker_use"
        ).fetchone()
    finally:
        db.close()
    return Stored(int(rows), int(total))


@contextmanager
def captured_sql(engine: AsyncEngine) -> Iterator[list[tuple[str, Any]]]:
    statements: list[tuple[str, Any]] = []

    def note(_conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        statements.append((statement, params))

    event.listen(engine.sync_engine, "before_cursor_execute", note)
    try:
        yield statements
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", note)


async def read_plan(engine: AsyncEngine, until: datetime) -> tuple[str, list[str]]:
    """The statement a step reads the timeline with, and SQLite's plan for it."""
    with captured_sql(engine) as statements:
        await StickerHabitStore(engine).scan_step(CURSOR, until, STEP)
    statement, params = next((s, p) for s, p in statements if "FROM message" in s)
    async with engine.connect() as conn:
        rows = await conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params)
        return statement, [str(row[-1]) for row in rows]


@dataclass(frozen=True)
class HabitResult:
    filled: Filled
    full: ScanRun
    full_stored: Stored
    added: Filled
    increment: ScanRun
    increment_stored: Stored
    plan: tuple[str, list[str]]


async def migrated(url: str) -> None:
    engine = create_engine(url)
    try:
        await upgrade_to_head(engine)
    finally:
        await engine.dispose()


async def run_habit(path: Path, args: argparse.Namespace) -> HabitResult:
    url = f"sqlite+aiosqlite:///{path}"
    await migrated(url)
    rng, now = random.Random(SEED), utc_now()
    span = Span(now - timedelta(days=DAYS), now - timedelta(hours=1), 0)
    print(f"  filling {args.messages:,} messages ({args.images:,} with an image) ...", flush=True)
    filled = fill(path, span, args.messages, args.images, rng)
    print(f"  filled in {filled.seconds:.1f} s; scanning ...", flush=True)
    engine = create_engine(url)
    try:
        full = await scan(engine, utc_now() - SETTLE, progress=True)
        full_stored = stored_counts(path)
        later = Span(span.end, utc_now() - SETTLE - timedelta(minutes=1), args.messages)
        images = round(args.increment * INCREMENT_IMAGE_SHARE)
        added = fill(path, later, args.increment, images, rng)
        increment = await scan(engine, utc_now() - SETTLE, progress=False)
        increment_stored = stored_counts(path)
        plan = await read_plan(engine, utc_now() - SETTLE)
    finally:
        await engine.dispose()
    return HabitResult(filled, full, full_stored, added, increment, increment_stored, plan)


# Part 1: report ------------------------------------------------------------------------------


def counted_ok(run: ScanRun, stored: Stored, scanned: int, total: Expected) -> bool:
    """The scan's own count against the stickers it read; the table against all inserted."""
    keys = len(total.keys)
    ok = run.stickers == scanned and stored.total == total.stickers and stored.rows == keys
    print(
        f"  stickers: {run.stickers:,} counted by the scan (inserted {scanned:,}); sticker_use "
        f"holds {stored.total:,} in {stored.rows:,} rows (inserted {total.stickers:,} in "
        f"{keys:,} (group, person, sticker) keys): {'OK' if ok else 'MISMATCH'}"
    )
    return ok


def merged(a: Expected, b: Expected) -> Expected:
    return Expected(a.stickers + b.stickers, a.keys | b.keys, a.images + b.images)


def report_scan(label: str, run: ScanRun) -> None:
    steps = run.step_ms
    print(
        f"  {label}: wall {run.wall_s:.2f} s, CPU {run.cpu_s:.2f} s; {run.messages:,} messages "
        f"read ({run.messages / run.wall_s:,.0f}/s) in {run.steps:,} step(s) of <= {STEP:,}"
    )
    print(
        f"  one step (one transaction; in the bot it holds the store's write lock): p50 "
        f"{percentile(steps, 50):.1f}, p99 {percentile(steps, 99):.1f}, max {steps[-1]:.1f} ms"
    )


def report_full(r: HabitResult, args: argparse.Namespace) -> bool:
    e = r.filled.expected
    print(
        f"\n-- habit: {args.messages:,} messages ({GROUPS} groups, {PEOPLE} people + the bot), "
        f"{e.images:,} images ({e.stickers:,} stickers, {e.images - e.stickers:,} pictures), "
        f"{HASHES:,} distinct hashes --"
    )
    print(
        f"  fill: {r.filled.seconds:.1f} s ({args.messages / r.filled.seconds:,.0f} messages/s; "
        f"sqlite3 executemany, {CHUNK:,} rows per transaction; not part of the target)"
    )
    report_scan("full scan", r.full)
    runs = -(-r.full.steps // MAX_STEPS)
    print(f"  the job (at most {MAX_STEPS} steps per run, every 30 min) would take {runs} run(s)")
    ok = counted_ok(r.full, r.full_stored, e.stickers, e)
    target = HABIT_TARGET_S * args.messages / HABIT_TARGET_MESSAGES
    print(
        f"  target: full scan of 1M messages with 100k images <= {HABIT_TARGET_S:.0f} s "
        f"(scaled: {target:.1f} s for {args.messages:,}): {r.full.wall_s:.2f} s "
        f"{verdict(r.full.wall_s <= target)}"
    )
    return ok


def report_increment(r: HabitResult, args: argparse.Namespace) -> bool:
    a, e = r.added.expected, r.filled.expected
    print(
        f"\n-- habit, incremental: {args.increment:,} newer messages ({a.images:,} images, "
        f"{a.stickers:,} stickers), added in {r.added.seconds:.2f} s --"
    )
    report_scan("incremental scan", r.increment)
    ok = counted_ok(r.increment, r.increment_stored, a.stickers, merged(e, a))
    full_us = r.full.wall_s / max(r.full.messages, 1) * 1e6
    new_us = r.increment.wall_s / max(r.increment.messages, 1) * 1e6
    print(
        f"  time per row read: full scan {full_us:.1f} µs (CPU "
        f"{r.full.cpu_s / max(r.full.messages, 1) * 1e6:.1f}), incremental {new_us:.1f} µs (CPU "
        f"{r.increment.cpu_s / max(r.increment.messages, 1) * 1e6:.1f}); "
        f"incremental / full {new_us / full_us:.2f}"
    )
    return ok


def report_plan(plan: tuple[str, list[str]]) -> None:
    statement, lines = plan
    print("  query plan of a step's read:")
    print(f"    {' '.join(statement.split())}")
    for line in lines:
        print(f"      {line}")


def habit(args: argparse.Namespace, runner: Runner) -> bool:
    with tempfile.TemporaryDirectory(prefix="pallas-media-bench-") as tmp:
        result = runner(run_habit(Path(tmp) / "habit.db", args))
    ok = report_full(result, args)
    ok = report_increment(result, args) and ok
    report_plan(result.plan)
    return ok


# Part 2: ingress -----------------------------------------------------------------------------

INGRESS_LINES = (
    "今天吃了火锅",
    "晚上一起打游戏",
    "哈哈哈哈笑死",
    "这个我也不知道",
    "明天要上班了好累",
    "刚下班，路上好堵",
    "周末去爬山吧",
    "这家店的奶茶不错",
)


class CountingHandler(NoTurnHandler):
    """Turns run and nothing is said; how many ran is noted (none is expected)."""

    def __init__(self) -> None:
        self.turns = 0

    async def handle(self, turn: Any) -> Any:
        self.turns += 1
        return await super().handle(turn)


class MediaSwitch:
    """Switches the registered media stage off for the `image, no fetch` blocks (its
    `on_message` is replaced on this instance; nothing else about it changes)."""

    def __init__(self, stage: MediaStage) -> None:
        self.stage = stage
        self.on = True
        self._run = stage.on_message
        stage.on_message = self.on_message  # type: ignore[method-assign]

    async def on_message(self, stored: StoredMessage) -> StageResult:
        return await self._run(stored) if self.on else CONTINUE


TEXT, IMAGE, IMAGE_NO_FETCH = "text", "image", "image, no fetch"
KINDS = (TEXT, IMAGE, IMAGE_NO_FETCH)
ROUNDS = 10  # each round runs a block of every kind, in a rotating order


def round_order(index: int) -> tuple[str, ...]:
    """Rotated each round and reversed every other one: no kind always goes first or last,
    so a slow drift over the run (the gate's activity views grow) falls on all kinds alike."""
    shift = index % len(KINDS)
    order = KINDS[shift:] + KINDS[:shift]
    return order[::-1] if index % 2 else order


def image_segment(n: int) -> dict[str, Any]:
    name = f"{n:032X}.gif"
    data = {
        "summary": "[动画表情]",
        "file": name,
        "sub_type": 1,
        "url": f"{UNREACHABLE}/{name}",
        "file_size": "46672",
    }
    return {"type": "image", "data": data}


def napcat_frame(n: int, image: bool) -> dict[str, Any]:
    """A group message as NapCat sends it: a line of text, or one sticker."""
    group, user = 800_000 + n % INGRESS_GROUPS, 20_000 + n % INGRESS_SENDERS
    line = f"{INGRESS_LINES[n % len(INGRESS_LINES)]} 第{n}句"
    segment = image_segment(n) if image else {"type": "text", "data": {"text": line}}
    return {
        "time": int(time.time()),
        "self_id": SELF_ID,
        "post_type": "message",
        "message_type": "group",
        "sub_type": "normal",
        "message_id": n,
        "real_id": n,
        "group_id": group,
        "user_id": user,
        "message": [segment],
        "message_format": "array",
        "raw_message": f"[CQ:image,file={n:032X}.gif,sub_type=1]" if image else line,
        "font": 14,
        "sender": {"user_id": user, "nickname": f"群友{user}", "card": "", "role": "member"},
        "group_name": f"测试群{group}",
    }


def parse_events(first: int, count: int, image: bool) -> list[Event]:
    events = []
    for n in range(first, first + count):
        parsed = PallasOneBotAdapter.json_to_event(napcat_frame(n, image))
        if parsed is None:
            raise RuntimeError(f"frame {n} not parsed")
        events.append(parsed)
    return events


async def worker_not_started() -> None:
    """Stands in for `Jobs.start`: the fetch jobs are committed and never run."""
    return None


@dataclass
class Rig:
    runtime: Runtime
    media: MediaSwitch
    handler: CountingHandler


def build_runtime(data_dir: Path, handler: CountingHandler) -> Runtime:
    # A fixed console token: none is generated (and logged) for a throwaway data dir.
    settings = load_settings(
        env_file=None, pallas_data_dir=data_dir, pallas_console_token="media-bench"
    )
    # No ambient lottery: a turn's cost would land on whichever kind happened to draw it.
    kernel = KernelConfig(gate=GatePolicy(ambient_probability=0.0))
    return Runtime.build(settings, kernel, handler, features=(RESPONDERS, MEDIA))


def media_stage(runtime: Runtime) -> MediaStage:
    stage = next(s for s in runtime.conversation.stages.stages if s.name == "media")
    if not isinstance(stage, MediaStage):
        raise RuntimeError(f"the media slot holds {type(stage).__name__}, not MediaStage")
    return stage


def build_rig(data_dir: Path) -> Rig:
    """The runtime as bot.py builds it, with what the plugin packages register: the
    responders' stages, and media installed exactly as packages/media installs it."""
    handler = CountingHandler()
    runtime = build_runtime(data_dir, handler)
    runtime.jobs.start = worker_not_started  # type: ignore[method-assign]
    return Rig(runtime, MediaSwitch(media_stage(runtime)), handler)


async def settle(rig: Rig) -> None:
    """Until the block's background work is committed: fetch-job enqueues, ledger events."""
    await rig.media.stage.drain()  # the gathered fetch asks, committed
    await rig.runtime.recorders.ledger.flush()


@dataclass(frozen=True)
class Block:
    kind: str
    cpu_s: float
    wall_s: float
    path_ms: list[float]
    turns: int


async def push(rig: Rig, events: Sequence[Event]) -> list[float]:
    """Each event as the ingress hook runs it: translated, then accepted; one at a time."""
    path = []
    for parsed in events:
        start = time.perf_counter()
        inbound = translate_event(parsed).event
        if not isinstance(inbound, InboundMessage):
            raise RuntimeError("a frame did not translate to a message")
        await rig.runtime.conversation.ingress.accept(inbound)
        path.append((time.perf_counter() - start) * 1000)
    return path


async def run_block(rig: Rig, first: int, count: int, kind: str) -> Block:
    events = parse_events(first, count, kind != TEXT)
    rig.media.on = kind != IMAGE_NO_FETCH
    gc.collect()
    turns = rig.handler.turns
    cpu0, t0 = time.process_time(), time.perf_counter()
    path = await push(rig, events)
    await settle(rig)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    return Block(kind, cpu, wall, path, rig.handler.turns - turns)


@dataclass(frozen=True)
class JobCounts:
    pending: int
    other: int  # running, done or failed: the worker ran (it must not)
    files: int  # under the assets folder


async def job_counts(rig: Rig) -> JobCounts:
    query = "SELECT status, count(*) FROM job WHERE kind = ? GROUP BY status"
    async with rig.runtime.engine.connect() as conn:
        rows = dict((await conn.exec_driver_sql(query, (FETCH_KIND,))).all())
    folder = rig.runtime.settings.pallas_data_dir / ASSETS_FOLDER
    files = sum(1 for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0
    pending = int(rows.pop("pending", 0))
    return JobCounts(pending, sum(int(v) for v in rows.values()), files)


@dataclass(frozen=True)
class IngressResult:
    blocks: list[Block]
    warm_images: int
    jobs: JobCounts
    order: tuple[str, ...]


async def warm_up(rig: Rig, first: int) -> int:
    """Every (group, sender) pair speaks once in text and once with a sticker (untimed)."""
    pairs = math.lcm(INGRESS_GROUPS, INGRESS_SENDERS)
    await run_block(rig, first, pairs, TEXT)
    await run_block(rig, first + pairs, pairs, IMAGE)
    return pairs


async def run_rounds(rig: Rig, count: int) -> list[Block]:
    size, first, blocks = count // ROUNDS, 100_000, []
    for index in range(ROUNDS):
        for kind in round_order(index):
            blocks.append(await run_block(rig, first + len(blocks) * size, size, kind))
    return blocks


async def run_ingress(data_dir: Path, count: int) -> IngressResult:
    rig = build_rig(data_dir)
    await rig.runtime.start()
    try:
        warm = await warm_up(rig, 1)
        blocks = await run_rounds(rig, count)
        jobs = await job_counts(rig)
        order = tuple(rig.runtime.conversation.stages.order)
    finally:
        await rig.runtime.stop()  # media's lifespan closes its HTTP client
    return IngressResult(blocks, warm, jobs, order)


# Part 2: report ------------------------------------------------------------------------------


@dataclass(frozen=True)
class KindFigures:
    messages: int
    cpu_ms: float  # per message
    path: list[float]  # accept wall times, ms, sorted
    turns: int


def figures(blocks: Sequence[Block], kind: str) -> KindFigures:
    mine = [b for b in blocks if b.kind == kind]
    messages = sum(len(b.path_ms) for b in mine)
    cpu = sum(b.cpu_s for b in mine)
    path = sorted(ms for b in mine for ms in b.path_ms)
    return KindFigures(messages, cpu / messages * 1000, path, sum(b.turns for b in mine))


def block_cpu(blocks: Sequence[Block], kind: str) -> list[float]:
    return sorted(b.cpu_s / len(b.path_ms) * 1000 for b in blocks if b.kind == kind)


def kind_row(label: str, f: KindFigures, per_block: list[float]) -> str:
    spread = f"{statistics.median(per_block):.3f} ({per_block[0]:.3f}-{per_block[-1]:.3f})"
    return (
        f"  {label:16}{f.messages:>9,}{f.cpu_ms:>12.3f}{spread:>27}"
        f"{fmt(percentile(f.path, 50), 3):>10}{fmt(percentile(f.path, 99), 3):>9}"
        f"{fmt(statistics.fmean(f.path), 3):>9}{f.turns:>7}"
    )


def round_ratios(blocks: Sequence[Block], kind: str) -> list[float]:
    """Per round: CPU per message of `kind` over that of text in the same round."""
    per_round = len(KINDS)
    ratios = []
    for start in range(0, len(blocks), per_round):
        cpu = {b.kind: b.cpu_s / len(b.path_ms) for b in blocks[start : start + per_round]}
        ratios.append(cpu[kind] / cpu[TEXT])
    return sorted(ratios)


def report_table(r: IngressResult) -> dict[str, KindFigures]:
    print(f"  stages: {' -> '.join(r.order)}")
    print(
        "  job worker NOT started: media.fetch jobs are enqueued (committed) only, never run; "
        "nothing is downloaded"
    )
    print(
        f"  {'kind':16}{'messages':>9}{'CPU/msg ms':>12}{'per block: median (range)':>27}"
        f"{'path p50':>10}{'p99':>9}{'mean':>9}{'turns':>7}"
    )
    kinds = {kind: figures(r.blocks, kind) for kind in KINDS}
    for kind, f in kinds.items():
        print(kind_row(kind, f, block_cpu(r.blocks, kind)))
    print(
        f"  ({ROUNDS} rounds of one block per kind, rotating order; path = translate_event + "
        "ingress.accept, wall ms; `image, no fetch` = the same image messages with the media "
        "stage switched off)"
    )
    return kinds


def report_ingress(r: IngressResult, count: int) -> bool:
    print(
        f"\n-- ingress: {count // ROUNDS * ROUNDS:,} messages of each kind, one at a time, "
        f"{INGRESS_GROUPS} groups, {INGRESS_SENDERS} senders --"
    )
    kinds = report_table(r)
    text, image, bare = kinds[TEXT], kinds[IMAGE], kinds[IMAGE_NO_FETCH]
    print(
        f"  image extra CPU per message: {image.cpu_ms - text.cpu_ms:.3f} ms, of which the "
        f"fetch job's enqueue {image.cpu_ms - bare.cpu_ms:.3f} ms"
    )
    ratio, rounds = image.cpu_ms / text.cpu_ms, round_ratios(r.blocks, IMAGE)
    print(
        f"  image / text within a round: median {statistics.median(rounds):.3f} "
        f"({rounds[0]:.3f}-{rounds[-1]:.3f}); without the fetch: median "
        f"{statistics.median(round_ratios(r.blocks, IMAGE_NO_FETCH)):.3f}"
    )
    print(
        f"  target: CPU per image message / per text message <= {RATIO_TARGET}: {ratio:.3f} "
        f"{verdict(ratio <= RATIO_TARGET)} (without the fetch: {bare.cpu_ms / text.cpu_ms:.3f})"
    )
    expected = r.warm_images + image.messages
    ok = r.jobs.pending == expected and r.jobs.other == 0 and r.jobs.files == 0
    print(
        f"  media.fetch jobs: {r.jobs.pending:,} pending (expected {expected:,}), "
        f"{r.jobs.other} run; files kept: {r.jobs.files}: {'OK' if ok else 'MISMATCH'}"
    )
    return ok


def ingress(args: argparse.Namespace, runner: Runner) -> bool:
    with tempfile.TemporaryDirectory(prefix="pallas-media-bench-") as tmp:
        result = runner(run_ingress(Path(tmp), args.count))
    return report_ingress(result, args.count)


# Entry ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("part", nargs="?", choices=("habit", "ingress", "all"), default="all")
    parser.add_argument("--messages", type=int, default=1_000_000, help="timeline size")
    parser.add_argument("--images", type=int, default=100_000, help="of them with an image")
    parser.add_argument("--increment", type=int, default=10_000, help="new messages, then")
    parser.add_argument("--count", type=int, default=2_000, help="ingress messages per kind")
    add_loop_option(parser)
    args = parser.parse_args(argv)
    if min(args.messages, args.increment) < 1 or args.count < ROUNDS:
        parser.error(f"--messages and --increment must be positive, --count at least {ROUNDS}")
    if not 0 <= args.images <= args.messages:
        parser.error("--images must be between 0 and --messages")
    return args


PARTS: dict[str, Callable[[argparse.Namespace, Runner], bool]] = {
    "habit": habit,
    "ingress": ingress,
}


def main() -> None:
    args = parse_args()
    logged = capture_warnings()
    loop_name, runner = pick_runner(args.loop)
    print(machine_line("at start", loop_name), flush=True)
    parts = list(PARTS) if args.part == "all" else [args.part]
    ok = all([PARTS[name](args, runner) for name in parts])
    print_logged(logged)
    print(f"\n{machine_line('at end', loop_name)}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
