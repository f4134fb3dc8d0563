"""Ingress benchmark: the real bot (ingress + SQLite commit + gate) against a bare NoneBot.

Both run as child processes with the bench probe plugin, which acks every message with a
`bench_ack` API call (in the real bot the ack carries the moment the message's row was
committed). One WebSocket client plays NapCat, sends group messages and times the commits
and acks. The two bots take turns over `--rounds` rounds, the one going first alternating,
each run a fresh process on a fresh data dir; figures are printed per round and as medians
over the rounds, with the CPU per message of each bot's whole process tree.

Run from the repository root: `.venv/bin/python bench/ingress_bench.py [--rounds 3]
[--burst N] [--rate R] [--seconds S] [--warmup N]`. Exits 1 if a message was lost; speed
targets only print PASS or MISS.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import itertools
import json
import math
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import websockets
from websockets.asyncio.client import ClientConnection

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.machine import machine_line  # noqa: E402
from tests.support.bot_process import BotProcess  # noqa: E402

BENCH_DIR = REPO_ROOT / "bench"
SCRIPTS = {"pallas": BENCH_DIR / "run_pallas.py", "bare": BENCH_DIR / "run_bare.py"}
SELF_ID = 3_000_000
PEOPLE = 50
GROUPS = 20
TARGET_RATIO = 0.9  # bot/bare burst messages/s, at least
TARGET_P99_MS = 20.0  # bot steady send -> ack p99, at most
TARGET_CPU_RATIO = 1.5  # bot/bare CPU per message, at most (informational)
TARGET_QUIET_S = 2.0  # the bot goes quiet (settle(), below) this soon after a burst's last ack
INFO = " (informational)"
IDLE_TIMEOUT_S = 15.0
# After a phase the bot may still be working (turns, ledger events): its CPU is counted until
# its process tree is idle, i.e. used at most IDLE_SHARE of a core over IDLE_WINDOW_S.
IDLE_WINDOW_S = 0.2
IDLE_SHARE = 0.05
SETTLE_LIMIT_S = 120.0  # a burst leaves turns behind: the next phase starts from idle
CLK_TCK = os.sysconf("SC_CLK_TCK")
PHRASES = ("哈哈哈", "有人打游戏吗", "今天吃什么", "牛牛在吗", "这个好耶", "晚安", "+1", "?")
# CLOCK_MONOTONIC is system-wide on Linux: the bot's commit stamps use the same clock.
clock = time.monotonic

Frame = tuple[int, str]  # (message id, JSON text)


# Messages -------------------------------------------------------------------------------------


class MessageFactory:
    """NapCat-shaped group messages from PEOPLE people in GROUPS groups, unique ids."""

    def __init__(self, seed: int = 7) -> None:
        self._rng = random.Random(seed)
        self._ids = itertools.count(1_000_001)
        self.sent_ids: list[int] = []

    def frames(self, count: int) -> list[Frame]:
        frames = [self._frame(next(self._ids)) for _ in range(count)]
        self.sent_ids.extend(mid for mid, _ in frames)
        return frames

    def _frame(self, message_id: int) -> Frame:
        user_id = 10_000 + self._rng.randrange(PEOPLE)
        group_id = 700_000 + self._rng.randrange(GROUPS)
        text = f"{self._rng.choice(PHRASES)} #{message_id}"
        event = {
            "time": int(time.time()),
            "self_id": SELF_ID,
            "post_type": "message",
            "message_type": "group",
            "sub_type": "normal",
            "message_id": message_id,
            "group_id": group_id,
            "user_id": user_id,
            "message": [{"type": "text", "data": {"text": text}}],
            "message_format": "array",
            "raw_message": text,
            "font": 14,
            "sender": {
                "user_id": user_id,
                "nickname": f"u{user_id}",
                "card": "",
                "role": "member",
            },
        }
        return message_id, json.dumps(event, ensure_ascii=False)


# Client ---------------------------------------------------------------------------------------


class AckClient:
    """A NapCat stand-in over one WebSocket: stamps sends and `bench_ack` arrivals, and keeps
    the commit stamp each ack carries (real bot only)."""

    def __init__(self, ws_url: str) -> None:
        self.ws_url = ws_url
        self.sent: dict[int, float] = {}
        self.acked: dict[int, float] = {}
        self.committed: dict[int, float] = {}
        self.duplicate_acks = 0
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiting: set[int] = set()
        self._all_in = asyncio.Event()

    async def connect(self) -> AckClient:
        headers = {"X-Self-ID": str(SELF_ID), "X-Client-Role": "Universal"}
        self._ws = await websockets.connect(self.ws_url, additional_headers=headers, max_size=None)
        self._reader = asyncio.create_task(self._read())
        lifecycle = {
            "time": int(time.time()),
            "self_id": SELF_ID,
            "post_type": "meta_event",
            "meta_event_type": "lifecycle",
            "sub_type": "connect",
        }
        await self._ws.send(json.dumps(lifecycle))
        return self

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)

    def expect(self, ids: Iterable[int]) -> None:
        self._waiting = set(ids) - self.acked.keys()
        self._all_in.clear()
        if not self._waiting:
            self._all_in.set()

    async def send(self, message_id: int, frame: str) -> None:
        assert self._ws is not None
        self.sent[message_id] = clock()
        await self._ws.send(frame)

    async def wait_acks(self, idle_timeout: float = IDLE_TIMEOUT_S) -> None:
        """Wait for every expected ack, giving up after idle_timeout s without progress."""
        seen, quiet_since = len(self.acked), clock()
        while not self._all_in.is_set():
            try:
                await asyncio.wait_for(self._all_in.wait(), timeout=0.5)
            except TimeoutError:
                if len(self.acked) != seen:
                    seen, quiet_since = len(self.acked), clock()
                elif clock() - quiet_since > idle_timeout:
                    return

    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for frame in self._ws:
                now = clock()
                call = json.loads(frame)
                if call.get("action") == "bench_ack":
                    params = call["params"]
                    self._record_ack(int(params["message_id"]), now, params.get("committed_at"))
                reply = {"status": "ok", "retcode": 0, "data": None, "echo": call.get("echo")}
                await self._ws.send(json.dumps(reply))
        except websockets.ConnectionClosed:
            pass

    def _record_ack(self, message_id: int, now: float, committed_at: float | None) -> None:
        if message_id in self.acked:
            self.duplicate_acks += 1
            return
        self.acked[message_id] = now
        if committed_at is not None:
            self.committed[message_id] = float(committed_at)
        self._waiting.discard(message_id)
        if not self._waiting:
            self._all_in.set()


# Process-tree CPU -----------------------------------------------------------------------------


def _proc_stats() -> dict[int, list[str]]:
    """Every process's /proc/<pid>/stat fields from `state` on (the name may hold spaces)."""
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            data = (entry / "stat").read_text()
        except OSError:  # ended while we looked
            continue
        stats[int(entry.name)] = data[data.rfind(")") + 2 :].split()
    return stats


def _tree(root: int, stats: dict[int, list[str]]) -> list[int]:
    """`root` and all its descendants, found by ppid links."""
    children: dict[int, list[int]] = defaultdict(list)
    for pid, fields in stats.items():
        children[int(fields[1])].append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            found.append(pid)
            todo.extend(children[pid])
    return found


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) of `root` and all its descendants; each process's
    waited-for children (cutime, cstime) too, so none that ended is missed."""
    stats = _proc_stats()
    # utime stime cutime cstime
    ticks = sum(int(v) for pid in _tree(root, stats) for v in stats[pid][11:15])
    return ticks / CLK_TCK


def tree_rss_mb(root: int) -> float:
    """Resident memory (MB) of `root` and all its descendants (VmRSS of /proc/<pid>/status)."""
    kb = 0
    for pid in _tree(root, _proc_stats()):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:  # ended while we looked
            continue
        rss = (line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))
        kb += int(next(rss, 0))
    return kb / 1024


async def settle(pid: int) -> tuple[float, float]:
    """Wait until the tree is idle (or SETTLE_LIMIT_S passed): (its CPU s then, s waited)."""
    started = clock()
    before = tree_cpu_s(pid)
    while True:
        await asyncio.sleep(IDLE_WINDOW_S)
        after = tree_cpu_s(pid)
        if after - before <= IDLE_SHARE * IDLE_WINDOW_S or clock() - started > SETTLE_LIMIT_S:
            return after, clock() - started
        before = after


# Phases ---------------------------------------------------------------------------------------


@dataclass
class PhaseResult:
    sent: int
    acked: int
    stamped: int  # acks that carried a commit stamp (real bot only)
    messages_per_s: float  # sent / (last ack - first send)
    commits_per_s: float  # sent / (last commit - first send); NaN without stamps
    ack_p50_ms: float
    ack_p99_ms: float
    commit_p50_ms: float  # send -> row committed; NaN without stamps
    commit_p99_ms: float
    max_send_lag_ms: float = 0.0
    cpu_s: float = math.nan
    idle_after_s: float = math.nan
    rss_mb: float = math.nan  # the process tree's resident memory once idle after the phase

    @property
    def cpu_per_message_us(self) -> float:
        return self.cpu_s / self.sent * 1e6 if self.sent else math.nan


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def per_second(count: int, first: float, last: float | None) -> float:
    return count / (last - first) if last is not None and last > first else math.nan


def summarize(client: AckClient, frames: Sequence[Frame], max_lag_s: float = 0.0) -> PhaseResult:
    ids = [mid for mid, _ in frames]
    if not ids:
        return PhaseResult(0, 0, 0, *[math.nan] * 6)
    first = client.sent[ids[0]]
    acked = [mid for mid in ids if mid in client.acked]
    stamped = [mid for mid in ids if mid in client.committed]
    acks = [(client.acked[mid] - client.sent[mid]) * 1000 for mid in acked]
    commits = [(client.committed[mid] - client.sent[mid]) * 1000 for mid in stamped]
    return PhaseResult(
        sent=len(ids),
        acked=len(acked),
        stamped=len(stamped),
        messages_per_s=per_second(
            len(ids), first, max((client.acked[m] for m in acked), default=None)
        ),
        commits_per_s=per_second(
            len(ids), first, max((client.committed[m] for m in stamped), default=None)
        ),
        ack_p50_ms=percentile(acks, 50),
        ack_p99_ms=percentile(acks, 99),
        commit_p50_ms=percentile(commits, 50),
        commit_p99_ms=percentile(commits, 99),
        max_send_lag_ms=max_lag_s * 1000,
    )


async def send_burst(client: AckClient, frames: Sequence[Frame]) -> float:
    for mid, frame in frames:
        await client.send(mid, frame)
    return 0.0


async def send_steady(client: AckClient, frames: Sequence[Frame], rate: float) -> float:
    """Send at `rate` messages/s on an absolute schedule, so lateness does not accumulate;
    return the worst lateness (s) against the schedule."""
    start = clock() + 0.05
    max_lag = 0.0
    for i, (mid, frame) in enumerate(frames):
        due = start + i / rate
        delay = due - clock()
        if delay > 0:
            await asyncio.sleep(delay)
        max_lag = max(max_lag, clock() - due)
        await client.send(mid, frame)
    return max_lag


async def run_phase(
    client: AckClient, frames: Sequence[Frame], pid: int, rate: float | None = None
) -> PhaseResult:
    """Send (a burst, or steadily at `rate`), wait for the acks, then for the bot to go idle;
    the CPU counted runs from just before the first send until it is idle."""
    client.expect(mid for mid, _ in frames)
    cpu_before = tree_cpu_s(pid)
    lag = await (send_burst(client, frames) if rate is None else send_steady(client, frames, rate))
    await client.wait_acks()
    cpu_after, idle_after = await settle(pid)
    result = summarize(client, frames, lag)
    result.cpu_s, result.idle_after_s = cpu_after - cpu_before, idle_after
    result.rss_mb = tree_rss_mb(pid)
    return result


# Runs -----------------------------------------------------------------------------------------


class ChildBot(BotProcess):
    """BotProcess keeps its Popen private; the CPU accounting needs the child's pid."""

    @property
    def pid(self) -> int:
        assert self._proc is not None, "not started"
        return self._proc.pid


@dataclass
class Run:
    name: str  # "pallas" (the real bot) or "bare"
    round: int
    warmup: PhaseResult
    burst: PhaseResult
    steady: PhaseResult
    duplicate_acks: int
    sent_ids: list[int]
    exit_code: int | None = None
    log_lines: list[str] = field(default_factory=list)
    db_rows: int | None = None
    db_ids_match: bool | None = None

    @property
    def acks_missing(self) -> int:
        return sum(p.sent - p.acked for p in (self.warmup, self.burst, self.steady))

    @property
    def stamps_missing(self) -> int:
        return sum(p.sent - p.stamped for p in (self.warmup, self.burst, self.steady))

    @property
    def lost(self) -> bool:
        rows_wrong = self.db_rows is not None and (
            self.db_rows != len(self.sent_ids) or not self.db_ids_match
        )
        return self.acks_missing > 0 or rows_wrong


async def drive(name: str, round_no: int, proc: ChildBot, args: argparse.Namespace) -> Run:
    factory = MessageFactory()
    client = await AckClient(proc.ws_url).connect()
    try:
        warmup = await run_phase(client, factory.frames(args.warmup), proc.pid)
        burst = await run_phase(client, factory.frames(args.burst), proc.pid)
        steady_frames = factory.frames(round(args.rate * args.seconds))
        steady = await run_phase(client, steady_frames, proc.pid, args.rate)
    finally:
        await client.close()
    return Run(name, round_no, warmup, burst, steady, client.duplicate_acks, factory.sent_ids)


async def bench_target(name: str, round_no: int, args: argparse.Namespace) -> Run:
    """One run: a fresh child process on a fresh temporary data dir."""
    with tempfile.TemporaryDirectory(prefix=f"pallas-bench-{name}-") as tmp:
        # No pacing to set: nothing is sent, and the bare NoneBot has no console.
        proc = ChildBot(Path(tmp), env={"LOG_LEVEL": "WARNING"}, script=SCRIPTS[name], pacing=None)
        proc.start()
        try:
            await proc.wait_ready(timeout=60)
            startup_log = len(proc.log())
            run = await drive(name, round_no, proc, args)
        finally:
            exit_code = proc.stop()
        run.exit_code = exit_code
        # Only what was logged from readiness on: start-up notices are not the benchmark's.
        logged = proc.log()[startup_log:]
        run.log_lines = [line for line in logged.splitlines() if line.strip()]
        if name == "pallas":
            run.db_rows, run.db_ids_match = check_db(proc.db_path, run.sent_ids)
        return run


def check_db(db_path: Path, sent_ids: Sequence[int]) -> tuple[int, bool]:
    """Row count of `message`, and whether its platform ids are exactly the ids sent."""
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute("SELECT platform_message_id FROM message").fetchall()
    stored = sorted(str(row[0]) for row in rows)
    return len(rows), stored == sorted(str(mid) for mid in sent_ids)


@dataclass
class Round:
    number: int
    order: tuple[str, str]
    runs: dict[str, Run]


async def run_rounds(args: argparse.Namespace) -> list[Round]:
    """Both bots per round; who goes first alternates, so drift and warm caches hit both."""
    rounds = []
    for number in range(1, args.rounds + 1):
        order = ("pallas", "bare") if number % 2 == 1 else ("bare", "pallas")
        runs = {name: await bench_target(name, number, args) for name in order}
        rounds.append(Round(number, order, runs))
        report_round(rounds[-1])
    return rounds


# Report ---------------------------------------------------------------------------------------

Getter = Callable[[Run], float]
BURST_RATE = "burst msgs/s (first send -> last ack)"
BURST_CPU = "burst CPU per msg µs (process tree)"
STEADY_ACK_P99 = "steady send -> ack p99 ms"
STEADY_CPU = "steady CPU per msg µs (process tree)"
BURST_RSS = "RSS after the burst MB (process tree)"
BURST_QUIET = "burst: idle again after last ack, s"
# (label, value of one run, whether a bot/bare ratio is reported)
MEASURES: list[tuple[str, Getter, bool]] = [
    (BURST_RATE, lambda r: r.burst.messages_per_s, True),
    ("burst rows/s (first send -> last commit)", lambda r: r.burst.commits_per_s, False),
    ("burst send -> row committed p50 ms", lambda r: r.burst.commit_p50_ms, False),
    ("burst send -> row committed p99 ms", lambda r: r.burst.commit_p99_ms, False),
    ("burst send -> ack p50 ms", lambda r: r.burst.ack_p50_ms, False),
    ("burst send -> ack p99 ms", lambda r: r.burst.ack_p99_ms, False),
    (BURST_CPU, lambda r: r.burst.cpu_per_message_us, True),
    (BURST_QUIET, lambda r: r.burst.idle_after_s, False),
    (BURST_RSS, lambda r: r.burst.rss_mb, True),
    ("steady send -> row committed p50 ms", lambda r: r.steady.commit_p50_ms, False),
    ("steady send -> row committed p99 ms", lambda r: r.steady.commit_p99_ms, False),
    ("steady send -> ack p50 ms", lambda r: r.steady.ack_p50_ms, False),
    (STEADY_ACK_P99, lambda r: r.steady.ack_p99_ms, False),
    ("steady client's worst lateness ms", lambda r: r.steady.max_send_lag_ms, False),
    (STEADY_CPU, lambda r: r.steady.cpu_per_message_us, True),
    ("steady: idle again after last ack, s", lambda r: r.steady.idle_after_s, False),
]
LABEL_WIDTH = 42


def fmt(value: float | int | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def median(values: Iterable[float]) -> float:
    """Median of the values that exist (NaN marks a figure a bot does not have)."""
    present = [v for v in values if not math.isnan(v)]
    return statistics.median(present) if present else math.nan


def ratio(rnd: Round, get: Getter) -> float:
    bot, bare = get(rnd.runs["pallas"]), get(rnd.runs["bare"])
    return bot / bare if bare and not math.isnan(bare) else math.nan


def table(rows: Iterable[tuple[str, float, float, float | None]]) -> None:
    print(f"  {'':{LABEL_WIDTH}}{'pallas':>10}{'bare':>10}{'bot/bare':>10}")
    for label, bot, bare, r in rows:
        digits = 2 if label.endswith(", s") else 1
        shown = "" if r is None else fmt(r, 2)
        print(f"  {label:{LABEL_WIDTH}}{fmt(bot, digits):>10}{fmt(bare, digits):>10}{shown:>10}")


def report_round(rnd: Round) -> None:
    print(f"\nround {rnd.number} ({rnd.order[0]} first)")
    table(
        (label, get(rnd.runs["pallas"]), get(rnd.runs["bare"]), ratio(rnd, get) if r else None)
        for label, get, r in MEASURES
    )
    for run in (rnd.runs["pallas"], rnd.runs["bare"]):
        print(f"  {checks_line(run)}")
        for line in run.log_lines[:5]:
            print(f"  [{run.name} log] {line}")


def checks_line(run: Run) -> str:
    line = (
        f"{run.name}: {len(run.sent_ids)} sent, {run.acks_missing} acks missing, "
        f"{run.duplicate_acks} duplicate acks"
    )
    if run.name == "pallas":
        line += (
            f", {run.stamps_missing} commit stamps missing, {fmt(run.db_rows)} rows in "
            f"`message` (ids match: {run.db_ids_match})"
        )
    return line + f", {len(run.log_lines)} log lines after start-up, exit {run.exit_code}"


@dataclass
class Medians:
    bot: dict[str, float]
    ratio: dict[str, float]  # median of the per-round bot/bare ratios


def report_medians(rounds: Sequence[Round]) -> Medians:
    print(f"\nmedians over {len(rounds)} rounds (bot/bare: median of the per-round ratios)")
    medians = Medians({}, {})
    rows = []
    for label, get, with_ratio in MEASURES:
        bot = median(get(rnd.runs["pallas"]) for rnd in rounds)
        bare = median(get(rnd.runs["bare"]) for rnd in rounds)
        rat = median(ratio(rnd, get) for rnd in rounds) if with_ratio else None
        medians.bot[label] = bot
        if rat is not None:
            medians.ratio[label] = rat
        rows.append((label, bot, bare, rat))
    table(rows)
    return medians


def report_targets(medians: Medians, rounds: int) -> None:
    print(f"\ntargets, judged on the medians over {rounds} rounds")
    at_least, at_most = True, False
    checks = [
        ("burst msgs/s bot/bare", medians.ratio[BURST_RATE], at_least, TARGET_RATIO, ""),
        ("bot steady send -> ack p99 ms", medians.bot[STEADY_ACK_P99], at_most, TARGET_P99_MS, ""),
        ("burst CPU per msg bot/bare", medians.ratio[BURST_CPU], at_most, TARGET_CPU_RATIO, INFO),
        ("bot quiet after the burst s", medians.bot[BURST_QUIET], at_most, TARGET_QUIET_S, ""),
        ("steady CPU per msg bot/bare", medians.ratio[STEADY_CPU], at_most, TARGET_CPU_RATIO, INFO),
    ]
    for label, value, minimum, target, note in checks:
        ok = value >= target if minimum else value <= target
        op = ">=" if minimum else "<="
        print(f"  {label:32}{fmt(value, 2):>8}   target {op} {target:<5}{verdict(ok)}{note}")


def report_header(args: argparse.Namespace) -> None:
    print(
        f"ingress benchmark  {args.rounds} rounds, each a fresh pallas and a fresh bare NoneBot "
        f"(who goes first alternates); {PEOPLE} people in {GROUPS} groups; warm-up "
        f"{args.warmup} msgs (untimed), burst {args.burst} msgs as fast as possible, steady "
        f"{fmt(args.rate, 0)} msg/s for {fmt(args.seconds, 0)} s"
    )
    print(
        "  row committed: the moment the transaction that inserted the row returned, inside "
        "the real bot (bench/run_pallas.py); ack: the probe matcher's bench_ack reaching the "
        "client (the bare NoneBot has only this). CPU: user + system time of the bot's whole "
        "process tree, from just before the first send until it is idle again, per message."
    )


# Entry ----------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each runs both bots")
    parser.add_argument("--burst", type=int, default=5000, help="burst size (messages)")
    parser.add_argument("--rate", type=float, default=300.0, help="steady rate (messages/s)")
    parser.add_argument("--seconds", type=float, default=10.0, help="steady duration (s)")
    parser.add_argument("--warmup", type=int, default=100, help="warm-up messages (untimed)")
    args = parser.parse_args(argv)
    if min(args.rounds, args.burst) < 1 or args.rate <= 0 or args.seconds <= 0:
        parser.error("--rounds, --burst, --rate and --seconds must be positive")
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")
    return args


def bots_loop() -> str:
    """The bots run under uvicorn, whose default loop is uvloop when it is installed."""
    bots = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    return f"bots {bots} (uvicorn's default), client asyncio"


async def amain(args: argparse.Namespace) -> int:
    print(machine_line("at start", bots_loop()))
    report_header(args)
    rounds = await run_rounds(args)
    medians = report_medians(rounds)
    report_targets(medians, len(rounds))
    lost = [run for rnd in rounds for run in rnd.runs.values() if run.lost]
    where = ", ".join(f"{run.name} round {run.round}" for run in lost)
    print(f"\nmessages lost: {'YES (' + where + ')' if lost else 'none'}")
    print(machine_line("at end", bots_loop()))
    return 1 if lost else 0


def main() -> None:
    sys.exit(asyncio.run(amain(parse_args())))


if __name__ == "__main__":
    main()
