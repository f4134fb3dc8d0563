"""Outbox benchmark: a backlog of queued replies drained after a reconnect.

A fresh temporary SQLite database is migrated to head and given many group streams (through
the timeline writer, as the bot's own messages would create them). With the outlet
disconnected (`is_connected` returns False) the dispatcher is started and the replies are
queued through `OutboxDelivery.deliver`, 1-3 bubbles each with typical Chinese lengths; then
nothing may have been sent. Then the outlet "reconnects" and the backlog drains. The outlet is
an in-process fake of the `Outlet` protocol: it notes the monotonic time of each send and
returns a fresh id at once, so what is measured is the dispatcher, not the network.

Part 1 runs the default `DeliveryPolicy()` (2 sends/s for all conversations, a burst of 5,
1 s between two sends to one conversation, bubble pauses from a typing speed). Draining the
whole backlog at that rate takes about half an hour, so it only watches the first `--seconds`
after the reconnect: the global send rate after the initial burst, the most sends in any
1-second window, per-conversation spacing against `stream_interval_s` and the bubble pauses,
and the time `OutboxStore.heads` (the query of every tick) takes with the whole backlog open.
Part 2 runs a permissive policy (no rate limit, no spacing, no pauses) on a fresh database
with the same backlog and drains all of it: messages/s and process CPU per message, which
includes each send's share of its batch's two SQLite updates (`sending`, `sent`; the heads of
different conversations that may go now are sent together), its ledger event and the heads
queries.

Part 3 times `heads()` (and its SQL alone) with 1,000, 10,000 and 50,000 rows open behind
20,000 sent ones: the statement skips from chat to chat along the open rows' partial index, so
its time should not grow with the backlog.

Parts 1 and 2 check every send against the database: each sent row was sent once, with its own
text, in its conversation, in id order within the conversation, and never while disconnected.

Run from the repository root: `.venv/bin/python bench/outbox_bench.py [--replies 2000]
[--groups 100] [--seconds 120] [--loop uvloop|asyncio]`. Exits 1 on a correctness problem (a
duplicate send, a send out of order or while disconnected, a row left open after the drain);
speed figures only print.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import gc
import itertools
import math
import random
import sqlite3
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from sqlalchemy import event, func, insert, select  # noqa: E402
from sqlalchemy.ext.asyncio import AsyncEngine  # noqa: E402

from bench.logs import capture_warnings, print_logged  # noqa: E402
from bench.loops import add_loop_option, pick_runner  # noqa: E402
from bench.machine import machine_line  # noqa: E402
from bench.stats import fmt, percentile, verdict  # noqa: E402
from pallas.core.actions import HISTORY_UNREADABLE, Capability, SentLookup  # noqa: E402
from pallas.core.inbound import Segment, StreamKey, StreamKind  # noqa: E402
from pallas.platform.onebot.send import own_message  # noqa: E402
from pallas.product.conversation.delivery.contract import OutgoingReply  # noqa: E402
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery, OutboxDispatcher  # noqa: E402
from pallas.product.conversation.delivery.pacing import DeliveryPolicy  # noqa: E402
from pallas.store.engine import create_engine  # noqa: E402
from pallas.store.ledger import LedgerWriter  # noqa: E402
from pallas.store.migrate import upgrade_to_head  # noqa: E402
from pallas.store.models import Event, OutboxItem  # noqa: E402
from pallas.store.outbox import OutboxStatus, OutboxStore  # noqa: E402
from pallas.store.timeline import TimelineWriter  # noqa: E402

SEED = 5
BOT_ID = "10000"
GROUP_BASE = 800_000  # group g is QQ group 800000 + g
HOLD_S = 2.5  # disconnected after queueing: the dispatcher looks again every second
HEADS_CALLS = 50  # timed `heads()` calls with the whole backlog open
DRAIN_TIMEOUT_S = 600.0
CPU_PER_BUBBLE_US = 400  # process CPU per sent bubble in the unpaced drain, at most
EPS = 1e-6
QUOTE_SHARE = 0.3  # replies whose first bubble quotes a message
PERMISSIVE = DeliveryPolicy(
    global_per_second=1e6, stream_interval_s=0.0, min_pause_s=0.0, max_pause_s=0.0
)
FRAGMENTS = (
    "哈哈哈哈",
    "我觉得可以",
    "这个我知道",
    "你说得对",
    "不太行吧",
    "等我看看",
    "明天再说",
    "好耶",
    "确实是这样",
    "别急，慢慢来",
    "火锅yyds",
    "这题我也不会",
    "已经修好了",
    "笑死我了",
    "早点睡吧",
    "下次一定",
    "有点意思",
    "我去查一下",
    "先试试重启",
    "官网上有教程",
    "周末一起去吗",
    "今天天气不错",
    "奶茶少喝点",
    "这个价格还行",
    "真的假的",
    "在的在的",
    "你们聊得好热闹",
    "牛牛表示赞同",
    "可以参考一下置顶",
    "这波操作我给满分",
)
ENDINGS = ("", "", "", "～", "！", "。", "？", "哈哈")


# Statistics -----------------------------------------------------------------------------------


def max_in_window(times: Sequence[float], width: float) -> int:
    """The most sends in any half-open window [t, t + width) (times sorted)."""
    return max((bisect.bisect_left(times, t + width) - i for i, t in enumerate(times)), default=0)


def timing_row(label: str, ms: list[float]) -> str:
    ms = sorted(ms)
    return (
        f"  {label:46}{len(ms):>7}{fmt(percentile(ms, 50), 3):>9}{fmt(percentile(ms, 99), 3):>9}"
        f"{fmt(ms[-1] if ms else math.nan, 3):>9}"
    )


# The fake outlet ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Send:
    at: float  # time.monotonic() when the outlet was called
    platform_id: str
    external_id: str
    text: str
    quote: str | None
    connected: bool  # what `is_connected` answered at that moment


class FakeOutlet:
    """The `Outlet` protocol in-process: every send succeeds at once with a fresh id."""

    def __init__(self, expected: int) -> None:
        self.connected = False
        self.sends: list[Send] = []
        self.done = asyncio.Event()  # set once `expected` sends were made
        self._expected = expected
        self._ids = itertools.count(5_000_000)

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None:
        platform_id = str(next(self._ids))
        text = "".join(s.text for s in segments)
        self.sends.append(
            Send(time.monotonic(), platform_id, stream.external_id, text, quote, self.connected)
        )
        if len(self.sends) >= self._expected:
            self.done.set()
        return platform_id

    async def poke(self, stream: StreamKey, user_id: str) -> bool:
        return True

    async def react(self, stream: StreamKey, platform_message_id: str, reaction: str) -> bool:
        return True

    async def capabilities(self, self_id: str) -> frozenset[Capability]:
        return frozenset()

    async def is_connected(self, self_id: str) -> bool:
        return self.connected

    async def find_sent(self, stream: StreamKey, text: str, since: datetime) -> SentLookup:
        return HISTORY_UNREADABLE


# The workload ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedReply:
    group: int
    bubbles: tuple[str, ...]
    quote: str | None


@dataclass(frozen=True)
class Plan:
    groups: int
    replies: list[PlannedReply]  # in queueing order

    @property
    def bubbles(self) -> int:
        return sum(len(r.bubbles) for r in self.replies)


def group_key(group: int) -> StreamKey:
    return StreamKey("qq", BOT_ID, StreamKind.GROUP, str(GROUP_BASE + group))


def make_bubble(rng: random.Random) -> str:
    """One bubble of a chat reply: one or two phrases, 4-30 characters."""
    parts = rng.sample(FRAGMENTS, 1 if rng.random() < 0.6 else 2)
    return "，".join(parts) + rng.choice(ENDINGS)


def make_plan(replies: int, groups: int) -> Plan:
    """`replies` replies spread evenly over the groups, queued in a shuffled order."""
    rng = random.Random(SEED)
    planned = []
    for i in range(replies):
        bubbles = tuple(make_bubble(rng) for _ in range(rng.randint(1, 3)))
        quote = str(rng.randrange(10**8, 10**9)) if rng.random() < QUOTE_SHARE else None
        planned.append(PlannedReply(i % groups, bubbles, quote))
    rng.shuffle(planned)
    return Plan(groups, planned)


# The store and the dispatcher -----------------------------------------------------------------


class Timed:
    """Wraps an async method of one object, keeping each call's wall time (ms)."""

    def __init__(self, owner: object, name: str) -> None:
        self.ms: list[float] = []
        inner = getattr(owner, name)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await inner(*args, **kwargs)
            finally:
                self.ms.append((time.perf_counter() - t0) * 1000)

        setattr(owner, name, timed)


@dataclass
class Rig:
    path: Path
    engine: AsyncEngine
    timeline: TimelineWriter
    ledger: LedgerWriter
    store: OutboxStore
    outlet: FakeOutlet
    dispatcher: OutboxDispatcher
    streams: dict[str, int]  # group's external id -> stream id


def utc_now() -> datetime:
    return datetime.now(UTC)


async def open_rig(path: Path, policy: DeliveryPolicy, plan: Plan) -> Rig:
    """A migrated database with the groups' streams; writers share one lock, as in the bot."""
    engine = create_engine(f"sqlite+aiosqlite:///{path}")
    await upgrade_to_head(engine)
    timeline = TimelineWriter(engine)
    ledger = LedgerWriter(engine)
    timeline.start()
    ledger.start()
    streams = await create_streams(timeline, plan.groups)
    store = OutboxStore(engine)
    outlet = FakeOutlet(plan.bubbles)
    dispatcher = OutboxDispatcher(store, outlet, ledger, policy, utc_now)
    return Rig(path, engine, timeline, ledger, store, outlet, dispatcher, streams)


async def close_rig(rig: Rig) -> None:
    await rig.dispatcher.stop()
    await rig.ledger.close()
    await rig.timeline.close()
    await rig.engine.dispose()


async def create_streams(timeline: TimelineWriter, groups: int) -> dict[str, int]:
    """One earlier message of the bot in each group creates its stream."""
    now, keys = utc_now(), [group_key(g) for g in range(groups)]
    written = await asyncio.gather(
        *(timeline.write(own_message(k, (), f"seed{k.external_id}", now)) for k in keys)
    )
    return {k.external_id: w.stream_id for k, w in zip(keys, written, strict=True)}


@dataclass
class Queued:
    enqueue_s: float
    held_s: float  # disconnected, from the first reply queued until the reconnect
    rows: int
    statuses: Counter[str]
    sent_while_held: int
    heads_ms: list[float] = field(default_factory=list)
    heads_rows: int = 0
    plain_heads_ms: list[float] = field(default_factory=list)  # its SQL through sqlite3
    heads_plan: str = ""


async def queue_backlog(rig: Rig, plan: Plan, time_heads: bool) -> Queued:
    """Start the dispatcher disconnected, queue every reply, wait; nothing may be sent."""
    rig.dispatcher.start()
    delivery = OutboxDelivery(rig.store, rig.dispatcher, utc_now)
    start = time.perf_counter()
    rows = 0
    for turn_id, reply in enumerate(plan.replies, 1):
        key = group_key(reply.group)
        stream_id = rig.streams[key.external_id]
        # Direct: answers to calls are never dropped by backpressure, so the whole backlog stays.
        outgoing = OutgoingReply(turn_id, stream_id, key, reply.bubbles, reply.quote, direct=True)
        rows += len((await delivery.deliver(outgoing)).queued)
    enqueue_s = time.perf_counter() - start
    hold_until = time.perf_counter() + HOLD_S
    queued = Queued(enqueue_s, 0.0, rows, Counter(), 0)
    if time_heads:
        for _ in range(HEADS_CALLS):
            t0 = time.perf_counter()
            heads = await rig.store.heads()
            queued.heads_ms.append((time.perf_counter() - t0) * 1000)
            queued.heads_rows = len(heads)
        await time_plain_heads(rig, queued)
    await asyncio.sleep(max(0.0, hold_until - time.perf_counter()))
    queued.statuses = await status_counts(rig.engine)
    queued.sent_while_held = len(rig.outlet.sends)
    queued.held_s = time.perf_counter() - start
    return queued


async def status_counts(engine: AsyncEngine) -> Counter[str]:
    query = select(OutboxItem.status, func.count()).group_by(OutboxItem.status)
    async with engine.connect() as conn:
        return Counter({status: n for status, n in (await conn.execute(query)).all()})


async def delivered_events(engine: AsyncEngine) -> int:
    query = select(func.count()).select_from(Event).where(Event.kind == "delivered")
    async with engine.connect() as conn:
        return int((await conn.execute(query)).scalar() or 0)


class Captured:
    """The SQL an engine runs while this is attached, to replay it through plain sqlite3."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.statements: list[tuple[str, Any]] = []
        self._target = engine.sync_engine
        event.listen(self._target, "before_cursor_execute", self._on)

    def _on(self, _conn: Any, _cursor: Any, sql: str, params: Any, _ctx: Any, _many: bool) -> None:
        self.statements.append((sql, params))

    def close(self) -> None:
        event.remove(self._target, "before_cursor_execute", self._on)


async def time_plain_heads(rig: Rig, queued: Queued) -> None:
    """The SQL of one `heads()` call, timed through plain sqlite3, and SQLite's plan for it."""
    captured = Captured(rig.engine)
    try:
        await rig.store.heads()
    finally:
        captured.close()
    sql, params = next((q, p) for q, p in reversed(captured.statements) if "open_chat" in q)
    conn = sqlite3.connect(rig.path)
    try:
        plan = conn.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
        queued.heads_plan = "; ".join(str(row[-1]) for row in plan)
        for _ in range(HEADS_CALLS):
            t0 = time.perf_counter()
            conn.execute(sql, params).fetchall()
            queued.plain_heads_ms.append((time.perf_counter() - t0) * 1000)
    finally:
        conn.close()


async def time_plain_marks(rig: Rig, ids: Sequence[int]) -> float:
    """µs per transaction of `mark()`'s UPDATE replayed through plain sqlite3, one commit each
    (same file, WAL, synchronous=NORMAL as the engine sets), twice per row as in a send."""
    captured = Captured(rig.engine)
    try:
        await rig.store.mark(ids[0], OutboxStatus.SENT, utc_now())
    finally:
        captured.close()
    sql, params = next((q, p) for q, p in captured.statements if q.startswith("UPDATE"))
    conn = sqlite3.connect(rig.path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=NORMAL")
        t0 = time.perf_counter()
        for item_id in itertools.chain(ids, ids):
            conn.execute("BEGIN")
            conn.execute(sql, (*params[:-1], item_id))
            conn.execute("COMMIT")
        return (time.perf_counter() - t0) / (2 * len(ids)) * 1e6
    finally:
        conn.close()


def freeze_heap() -> None:
    """As the bot does once at start-up; outside the timed drain, it is not per message."""
    gc.collect()
    gc.freeze()


def reconnect(rig: Rig) -> float:
    """Let the outlet report connected."""
    rig.outlet.connected = True
    rig.dispatcher.wake()
    return time.monotonic()


# Checking every send against the database -----------------------------------------------------


@dataclass(frozen=True)
class RowFacts:
    id: int
    reply_id: int | None
    stream_id: int
    status: str
    platform_id: str | None
    text: str
    quote: str | None
    pause_s: float


async def load_rows(engine: AsyncEngine) -> dict[int, RowFacts]:
    query = select(
        OutboxItem.id,
        OutboxItem.reply_id,
        OutboxItem.stream_id,
        OutboxItem.status,
        OutboxItem.platform_message_id,
        OutboxItem.payload,
    )
    async with engine.connect() as conn:
        result = (await conn.execute(query)).all()
    return {
        r.id: RowFacts(
            r.id,
            r.reply_id,
            r.stream_id,
            r.status,
            r.platform_message_id,
            str(r.payload.get("text", "")),
            r.payload.get("quote"),
            float(r.payload.get("pause_s", 0.0)),
        )
        for r in result
    }


@dataclass
class Audit:
    problems: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    by_stream: dict[int, list[tuple[Send, RowFacts]]] = field(default_factory=dict)

    def flag(self, kind: str, example: str) -> None:
        self.problems[kind] += 1
        if len(self.examples) < 5:
            self.examples.append(f"{kind}: {example}")


def audit(sends: Sequence[Send], rows: dict[int, RowFacts], streams: dict[str, int]) -> Audit:
    """Match each send to the row the database says it delivered, then check the order."""
    result = Audit()
    by_platform = {r.platform_id: r for r in rows.values() if r.platform_id is not None}
    per_stream: dict[int, list[tuple[Send, RowFacts]]] = defaultdict(list)
    for send in sends:
        if not send.connected:
            result.flag("sent while disconnected", send.platform_id)
        row = by_platform.get(send.platform_id)
        if row is None or row.status != "sent":
            result.flag("a send whose row is not marked sent with its id (sent twice?)", send.text)
            continue
        if (row.text, row.quote, row.stream_id) != (
            send.text,
            send.quote,
            streams.get(send.external_id),
        ):
            result.flag("sent text, quote or group differs from its row", f"row {row.id}")
        per_stream[row.stream_id].append((send, row))
    marked = sum(1 for r in rows.values() if r.status == "sent")
    if marked != len(by_platform) or marked != len(sends):
        result.flag("rows marked sent != sends", f"{marked} rows, {len(sends)} sends")
    for stream_id, pairs in per_stream.items():
        ids = [row.id for _, row in pairs]
        if any(b <= a for a, b in itertools.pairwise(ids)):
            result.flag("out of order within a conversation", f"stream {stream_id}: {ids[:8]}")
    result.by_stream = dict(per_stream)
    return result


@dataclass
class Spacing:
    gaps: list[float]  # every gap between two sends to one conversation (s)
    bubble_gaps: list[float]  # between two bubbles of one reply
    min_slack: float  # smallest gap minus what the policy requires
    violations: int
    tightest: tuple[float, float] = (math.nan, math.nan)  # (gap, required) of min slack


def spacing(result: Audit, policy: DeliveryPolicy) -> Spacing:
    out = Spacing([], [], math.inf, 0)
    for pairs in result.by_stream.values():
        for (a, before), (b, row) in itertools.pairwise(pairs):
            gap, required = b.at - a.at, max(row.pause_s, policy.stream_interval_s)
            out.gaps.append(gap)
            if row.reply_id is not None and row.reply_id == before.reply_id:
                out.bubble_gaps.append(gap)
            if gap - required < out.min_slack:
                out.min_slack, out.tightest = gap - required, (gap, required)
            out.violations += gap < required - EPS
    out.gaps.sort()
    out.bubble_gaps.sort()
    return out


def report_audit(result: Audit, label: str) -> None:
    if not result.problems:
        print(f"  {label}: every send matched its row, once, in id order per conversation")
        return
    for kind, count in result.problems.items():
        print(f"  WRONG ({label}): {count} x {kind}")
    for example in result.examples:
        print(f"    e.g. {example}")


def report_backlog(q: Queued, plan: Plan) -> None:
    per_reply = q.enqueue_s / max(len(plan.replies), 1) * 1000
    print(
        f"  queued {len(plan.replies)} replies ({q.rows} rows) into {plan.groups} groups in "
        f"{fmt(q.enqueue_s)} s ({fmt(per_reply, 3)} ms per reply, dispatcher running and "
        f"disconnected); statuses {fmt(q.held_s, 1)} s after the first was queued: "
        f"{dict(q.statuses)}; sends while disconnected: {q.sent_while_held}"
    )


# Part 1: the default policy -------------------------------------------------------------------


@dataclass
class PacedResult:
    policy: DeliveryPolicy
    plan: Plan
    queued: Queued
    reconnected: float
    seconds: float
    cpu_s: float
    sends: list[Send]
    audit: Audit
    heads_ms: list[float]
    statuses: Counter[str]
    delivered: int


async def run_paced(path: Path, plan: Plan, seconds: float) -> PacedResult:
    policy = DeliveryPolicy()
    rig = await open_rig(path, policy, plan)
    try:
        queued = await queue_backlog(rig, plan, time_heads=True)
        heads = Timed(rig.store, "heads")
        freeze_heap()
        cpu0 = time.process_time()
        reconnected = reconnect(rig)
        await asyncio.sleep(max(0.0, reconnected + seconds - time.monotonic()))
        cpu_s = time.process_time() - cpu0
        await rig.dispatcher.stop()
        await rig.ledger.flush()
        rows = await load_rows(rig.engine)
        sends = list(rig.outlet.sends)
        result = PacedResult(
            policy,
            plan,
            queued,
            reconnected,
            seconds,
            cpu_s,
            sends,
            audit(sends, rows, rig.streams),
            list(heads.ms),
            await status_counts(rig.engine),
            await delivered_events(rig.engine),
        )
    finally:
        await close_rig(rig)
        gc.unfreeze()
    return result


def steady_rate(times: Sequence[float], burst: int) -> float:
    """Sends/s after the first `burst` sends (the bucket's initial tokens)."""
    steady = times[burst:]
    return (len(steady) - 1) / (steady[-1] - steady[0]) if len(steady) > 1 else math.nan


def window_rates(times: Sequence[float], width: float) -> list[float]:
    """Sends/s in consecutive full windows of `width` s from the first time on."""
    if len(times) < 2:
        return []
    counts = Counter(int((t - times[0]) // width) for t in times)
    full = int((times[-1] - times[0]) // width)
    return [counts[k] / width for k in range(full)]


def report_paced(r: PacedResult) -> None:
    p = r.policy
    print(
        f"\n-- part 1: default DeliveryPolicy (global {fmt(p.global_per_second, 1)}/s, burst "
        f"{p.global_burst}, stream interval {fmt(p.stream_interval_s, 1)} s, pauses "
        f"{fmt(p.min_pause_s, 1)}-{fmt(p.max_pause_s, 1)} s), first {fmt(r.seconds, 0)} s "
        "after the reconnect --"
    )
    report_backlog(r.queued, r.plan)
    q = r.queued
    print(
        f"  heads() with {q.rows} rows open ({q.heads_rows} heads), "
        f"{len(q.heads_ms)} calls: p50 {fmt(percentile(sorted(q.heads_ms), 50), 3)} ms, "
        f"p99 {fmt(percentile(sorted(q.heads_ms), 99), 3)} ms; its SQL alone through plain "
        f"sqlite3 p50 {fmt(percentile(sorted(q.plain_heads_ms), 50), 3)} ms"
    )
    print(f"  heads() plan: {q.heads_plan}")
    times = [s.at for s in r.sends]
    if not times:
        print("  no send at all after the reconnect")
        report_audit(r.audit, "part 1")
        return
    report_rate(r, times)
    report_spacing(r)
    report_paced_cost(r, times)
    report_audit(r.audit, "part 1")


def report_rate(r: PacedResult, times: list[float]) -> None:
    p = r.policy
    burst = p.global_burst
    rate = steady_rate(times, burst)
    windows = window_rates(times[burst:], 10.0) or [math.nan]
    in_1s, in_100ms = max_in_window(times, 1.0), max_in_window(times, 0.1)
    bound = burst + math.ceil(p.global_per_second * 1.0)
    print(
        f"  sends: {len(times)} in {fmt(times[-1] - r.reconnected, 1)} s; first "
        f"{fmt((times[0] - r.reconnected) * 1000, 1)} ms after the reconnect; sends within "
        f"100 ms of the first: {sum(1 for t in times if t - times[0] < 0.1)}"
    )
    print(
        f"  steady global rate (after the first {burst}): {fmt(rate, 4)} /s, configured "
        f"{fmt(p.global_per_second, 1)} /s   {verdict(rate <= p.global_per_second * 1.001)}; "
        f"in 10 s windows {fmt(min(windows), 1)} to {fmt(max(windows), 1)} /s"
    )
    print(
        f"  most sends in any 0.1 s window: {in_100ms} (global_burst {burst})   "
        f"{verdict(in_100ms <= burst)}; in any 1 s window: {in_1s} (burst + 1 s of refill = "
        f"{bound})   {verdict(in_1s <= bound)}"
    )


def report_spacing(r: PacedResult) -> None:
    s = spacing(r.audit, r.policy)
    per_group = sorted(len(pairs) for pairs in r.audit.by_stream.values())
    print(
        f"  groups reached: {len(per_group)} of {r.plan.groups} (heads go oldest first), "
        f"sends per group {per_group[0] if per_group else 0}-{per_group[-1] if per_group else 0}"
    )
    print(
        f"  per conversation: {len(s.gaps)} gaps, min "
        f"{fmt(s.gaps[0] if s.gaps else math.nan, 3)} s, p50 "
        f"{fmt(percentile(s.gaps, 50), 2)} s (stream_interval_s "
        f"{fmt(r.policy.stream_interval_s, 1)})"
    )
    print(
        f"  between bubbles of one reply: {len(s.bubble_gaps)} gaps, min "
        f"{fmt(s.bubble_gaps[0] if s.bubble_gaps else math.nan, 3)} s; tightest against the "
        f"rule max(pause, interval): gap {fmt(s.tightest[0], 4)} s for {fmt(s.tightest[1], 3)} s "
        f"required (slack {fmt(s.min_slack * 1000, 2)} ms); shorter than required: "
        f"{s.violations}   {verdict(s.violations == 0)}"
    )


def report_paced_cost(r: PacedResult, times: list[float]) -> None:
    total, burst = r.plan.bubbles, r.policy.global_burst
    rate = steady_rate(times, burst)
    ticks = len(r.heads_ms)
    print(
        f"  dispatcher: {ticks} ticks ({fmt(ticks / r.seconds, 1)}/s), heads() per tick p50 "
        f"{fmt(percentile(sorted(r.heads_ms), 50), 3)} ms p99 "
        f"{fmt(percentile(sorted(r.heads_ms), 99), 3)} ms; process CPU "
        f"{fmt(r.cpu_s, 2)} s in {fmt(r.seconds, 0)} s ({fmt(100 * r.cpu_s / r.seconds, 1)}% of "
        f"a core, {fmt(r.cpu_s / len(times) * 1000, 2)} ms per send)"
    )
    print(f"  after stopping: statuses {dict(r.statuses)}; 'delivered' ledger events {r.delivered}")
    if math.isnan(rate):
        return
    whole_min = (total - burst) / rate / 60
    left_s = r.policy.stale_after_s - r.queued.held_s  # the oldest row's age at the reconnect
    reach = min(total, burst + int(rate * max(0.0, left_s)))
    print(
        f"  projection (not measured): the whole backlog of {total} bubbles needs "
        f"{fmt(whole_min, 1)} min at this rate; rows expire {fmt(r.policy.stale_after_s, 0)} s "
        f"after they were queued, so with {fmt(r.queued.held_s, 0)} s of outage about {reach} "
        f"would go out and {total - reach} expire"
    )


# Part 2: no pacing, the dispatcher's own cost -------------------------------------------------


@dataclass
class DrainResult:
    plan: Plan
    queued: Queued
    reconnected: float
    drained: bool
    wall_s: float  # reconnect to the last send
    cpu_s: float  # reconnect to the last ledger event committed
    flushed_s: float
    sends: list[Send]
    audit: Audit
    heads_ms: list[float]
    mark_ms: list[float]
    statuses: Counter[str]
    delivered: int
    plain_mark_us: float = math.nan


async def run_drain(path: Path, plan: Plan) -> DrainResult:
    rig = await open_rig(path, PERMISSIVE, plan)
    try:
        queued = await queue_backlog(rig, plan, time_heads=False)
        heads = Timed(rig.store, "heads")
        marks = [Timed(rig.store, name) for name in ("mark_sending", "mark_sent")]
        freeze_heap()
        cpu0 = time.process_time()
        reconnected = reconnect(rig)
        try:
            await asyncio.wait_for(rig.outlet.done.wait(), timeout=DRAIN_TIMEOUT_S)
            drained = True
        except TimeoutError:
            drained = False
        await rig.ledger.flush()
        cpu_s = time.process_time() - cpu0
        flushed_s = time.monotonic() - reconnected
        await rig.dispatcher.stop()
        sends = list(rig.outlet.sends)
        rows = await load_rows(rig.engine)
        result = DrainResult(
            plan,
            queued,
            reconnected,
            drained,
            (sends[-1].at - reconnected) if sends else math.nan,
            cpu_s,
            flushed_s,
            sends,
            audit(sends, rows, rig.streams),
            list(heads.ms),
            [ms for timed in marks for ms in timed.ms],
            await status_counts(rig.engine),
            await delivered_events(rig.engine),
        )
        if rows:  # after the checks: it rewrites rows
            result.plain_mark_us = await time_plain_marks(rig, sorted(rows))
    finally:
        await close_rig(rig)
        gc.unfreeze()
    return result


def drain_problems(r: DrainResult) -> int:
    """Open rows after the drain are lost replies: a correctness problem."""
    left = r.statuses.get("pending", 0) + r.statuses.get("sending", 0)
    return sum(r.audit.problems.values()) + left + (0 if r.drained else 1)


def report_drain(r: DrainResult) -> None:
    print(
        "\n-- part 2: permissive policy (global 1e6/s, no stream interval, no pauses), "
        "the whole backlog --"
    )
    report_backlog(r.queued, r.plan)
    n = len(r.sends)
    if not r.drained:
        print(f"  WRONG: the drain did not finish within {fmt(DRAIN_TIMEOUT_S, 0)} s")
    print(
        f"  drained {n} sends in {fmt(r.wall_s, 3)} s after the reconnect: "
        f"{fmt(n / r.wall_s if r.wall_s else math.nan, 0)} messages/s; ledger events committed "
        f"after {fmt(r.flushed_s, 3)} s"
    )
    print(
        f"  process CPU {fmt(r.cpu_s, 3)} s: {fmt(r.cpu_s / max(n, 1) * 1e6, 0)} µs per message "
        "(its share of its batch's two updates and of the heads queries, its ledger event, "
        f"the loop)   target <= {CPU_PER_BUBBLE_US} µs "
        f"{verdict(r.cpu_s / max(n, 1) * 1e6 <= CPU_PER_BUBBLE_US)}"
    )
    print(f"  {'(ms)':46}{'calls':>7}{'p50':>9}{'p99':>9}{'max':>9}")
    print(timing_row(f"heads() per tick, {r.queued.rows} -> 0 rows open", r.heads_ms))
    print(timing_row("mark_sending / mark_sent (one batch each)", r.mark_ms))
    print(
        f"  time in heads() {fmt(sum(r.heads_ms) / 1000, 3)} s, in the batch marks "
        f"{fmt(sum(r.mark_ms) / 1000, 3)} s of {fmt(r.wall_s, 3)} s; mark()'s UPDATE + commit "
        f"through plain sqlite3: {fmt(r.plain_mark_us, 1)} µs per transaction"
    )
    print(f"  statuses {dict(r.statuses)}; 'delivered' ledger events {r.delivered}")
    report_audit(r.audit, "part 2")


# Entry ----------------------------------------------------------------------------------------


# Part 3: heads() against the depth of the backlog ------------------------------------------

DEPTHS = (1_000, 10_000, 50_000)  # open rows, spread over the groups, behind 20,000 sent ones


async def heads_at_depths(path: Path, plan: Plan) -> list[tuple[int, float, float]]:
    """(open rows, heads() p50 ms, its SQL through plain sqlite3 p50 ms) per depth. Rows are
    inserted directly (queueing 50,000 replies one by one would take minutes)."""
    rig = await open_rig(path, PERMISSIVE, plan)
    rng, now, figures, open_rows = random.Random(SEED), utc_now(), [], 0
    try:
        await insert_rows(rig, 20_000, "sent", rng, now)
        for depth in DEPTHS:
            await insert_rows(rig, depth - open_rows, "pending", rng, now)
            open_rows = depth
            timed = []
            for _ in range(HEADS_CALLS):
                t0 = time.perf_counter()
                await rig.store.heads()
                timed.append((time.perf_counter() - t0) * 1000)
            queued = Queued(0.0, 0.0, depth, Counter(), 0)
            await time_plain_heads(rig, queued)
            plain = percentile(sorted(queued.plain_heads_ms), 50)
            figures.append((depth, percentile(sorted(timed), 50), plain))
    finally:
        await close_rig(rig)
    return figures


async def insert_rows(rig: Rig, count: int, status: str, rng: random.Random, now: datetime) -> None:
    streams = list(rig.streams.values())
    rows = [
        {
            "stream_id": rng.choice(streams),
            "kind": "message",
            "payload": {"segments": [{"type": "text", "data": {"text": make_bubble(rng)}}]},
            "direct": False,
            "status": status,
            "attempts": 0,
            "not_before": now,
            "created_at": now,
            "updated_at": now,
            "last_error": "",
        }
        for _ in range(count)
    ]
    async with rig.engine.begin() as conn:
        await conn.execute(insert(OutboxItem), rows)


def report_depths(figures: list[tuple[int, float, float]]) -> None:
    print("\n-- part 3: heads() against the backlog's depth (20,000 sent rows before it) --")
    for depth, whole, plain in figures:
        print(
            f"  {depth:>6} rows open: heads() p50 {fmt(whole, 3)} ms; its SQL alone through "
            f"plain sqlite3 p50 {fmt(plain, 3)} ms"
        )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--replies", type=int, default=2_000, help="queued replies")
    parser.add_argument("--groups", type=int, default=100, help="group streams")
    parser.add_argument(
        "--seconds", type=float, default=120.0, help="part 1: seconds watched after reconnect"
    )
    add_loop_option(parser)
    args = parser.parse_args(argv)
    if min(args.replies, args.groups) < 1 or args.seconds <= 0:
        parser.error("--replies, --groups and --seconds must be positive")
    return args


def main() -> None:
    args = parse_args()
    logged = capture_warnings()
    loop_name, runner = pick_runner(args.loop)
    plan = make_plan(args.replies, args.groups)
    print(machine_line("at start", loop_name))
    print(f"outbox benchmark  {args.replies} replies, {plan.bubbles} bubbles, {args.groups} groups")
    with tempfile.TemporaryDirectory(prefix="pallas-outbox-bench-") as tmp:
        paced = runner(run_paced(Path(tmp) / "paced.db", plan, args.seconds))
        report_paced(paced)
        drain = runner(run_drain(Path(tmp) / "drain.db", plan))
        report_drain(drain)
        report_depths(runner(heads_at_depths(Path(tmp) / "depth.db", plan)))
    print_logged(logged)
    print(f"\n{machine_line('at end', loop_name)}")
    problems = sum(paced.audit.problems.values()) + paced.queued.sent_while_held
    problems += drain_problems(drain) + drain.queued.sent_while_held
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
