"""Ingress benchmark: the real bot (ingress + SQLite commit) against a bare NoneBot.

Both run as child processes with the bench probe plugin, which acks every message with a
`bench_ack` API call. One WebSocket client plays NapCat, sends group messages and times the
acks. Run from the repository root: `python bench/ingress_bench.py [--burst N] [--rate R]
[--seconds S]`. Exits 1 if a message was lost; speed targets only print PASS or MISS.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.support.bot_process import BotProcess  # noqa: E402

BENCH_DIR = REPO_ROOT / "bench"
SELF_ID = 3_000_000
PEOPLE = 50
GROUPS = 20
TARGET_RATIO = 0.8
TARGET_P99_MS = 20.0
IDLE_TIMEOUT_S = 15.0
PHRASES = ("哈哈哈", "有人打游戏吗", "今天吃什么", "牛牛在吗", "这个好耶", "晚安", "+1", "?")

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
    """A NapCat stand-in over one WebSocket: stamps sends and `bench_ack` arrivals."""

    def __init__(self, ws_url: str) -> None:
        self.ws_url = ws_url
        self.sent: dict[int, float] = {}
        self.acked: dict[int, float] = {}
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
        self.sent[message_id] = time.perf_counter()
        await self._ws.send(frame)

    async def wait_acks(self, idle_timeout: float = IDLE_TIMEOUT_S) -> None:
        """Wait for every expected ack, giving up after idle_timeout s without progress."""
        seen, quiet_since = len(self.acked), time.monotonic()
        while not self._all_in.is_set():
            try:
                await asyncio.wait_for(self._all_in.wait(), timeout=0.5)
            except TimeoutError:
                if len(self.acked) != seen:
                    seen, quiet_since = len(self.acked), time.monotonic()
                elif time.monotonic() - quiet_since > idle_timeout:
                    return

    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for frame in self._ws:
                now = time.perf_counter()
                call = json.loads(frame)
                if call.get("action") == "bench_ack":
                    self._record_ack(int(call["params"]["message_id"]), now)
                reply = {"status": "ok", "retcode": 0, "data": None, "echo": call.get("echo")}
                await self._ws.send(json.dumps(reply))
        except websockets.ConnectionClosed:
            pass

    def _record_ack(self, message_id: int, now: float) -> None:
        if message_id in self.acked:
            self.duplicate_acks += 1
            return
        self.acked[message_id] = now
        self._waiting.discard(message_id)
        if not self._waiting:
            self._all_in.set()


# Phases ---------------------------------------------------------------------------------------


@dataclass
class PhaseResult:
    sent: int
    acked: int
    messages_per_s: float
    p50_ms: float
    p99_ms: float
    max_send_lag_ms: float = 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def summarize(client: AckClient, frames: Sequence[Frame], max_lag_s: float = 0.0) -> PhaseResult:
    ids = [mid for mid, _ in frames]
    if not ids:
        return PhaseResult(0, 0, math.nan, math.nan, math.nan)
    acked = [mid for mid in ids if mid in client.acked]
    latencies = [(client.acked[mid] - client.sent[mid]) * 1000 for mid in acked]
    span = max((client.acked[mid] for mid in acked), default=math.nan) - client.sent[ids[0]]
    return PhaseResult(
        sent=len(ids),
        acked=len(acked),
        messages_per_s=len(ids) / span if span > 0 else math.nan,
        p50_ms=percentile(latencies, 50),
        p99_ms=percentile(latencies, 99),
        max_send_lag_ms=max_lag_s * 1000,
    )


async def run_burst(client: AckClient, frames: Sequence[Frame]) -> PhaseResult:
    client.expect(mid for mid, _ in frames)
    for mid, frame in frames:
        await client.send(mid, frame)
    await client.wait_acks()
    return summarize(client, frames)


async def run_steady(client: AckClient, frames: Sequence[Frame], rate: float) -> PhaseResult:
    """Send at `rate` messages/s on an absolute schedule, so lateness does not accumulate."""
    client.expect(mid for mid, _ in frames)
    start = time.perf_counter() + 0.05
    max_lag = 0.0
    for i, (mid, frame) in enumerate(frames):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        max_lag = max(max_lag, time.perf_counter() - due)
        await client.send(mid, frame)
    await client.wait_acks()
    return summarize(client, frames, max_lag)


# Targets --------------------------------------------------------------------------------------


@dataclass
class TargetResult:
    name: str
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
        phases = (self.warmup, self.burst, self.steady)
        return sum(p.sent - p.acked for p in phases)

    @property
    def lost(self) -> bool:
        rows_wrong = self.db_rows is not None and (
            self.db_rows != len(self.sent_ids) or not self.db_ids_match
        )
        return self.acks_missing > 0 or rows_wrong


async def drive(name: str, ws_url: str, args: argparse.Namespace) -> TargetResult:
    factory = MessageFactory()
    client = await AckClient(ws_url).connect()
    try:
        warmup = await run_burst(client, factory.frames(args.warmup))
        await asyncio.sleep(0.5)
        burst = await run_burst(client, factory.frames(args.burst))
        await asyncio.sleep(0.5)
        steady_frames = factory.frames(round(args.rate * args.seconds))
        steady = await run_steady(client, steady_frames, args.rate)
    finally:
        await client.close()
    return TargetResult(name, warmup, burst, steady, client.duplicate_acks, factory.sent_ids)


async def bench_target(name: str, script: Path, args: argparse.Namespace) -> TargetResult:
    with tempfile.TemporaryDirectory(prefix=f"pallas-bench-{name}-") as tmp:
        proc = BotProcess(Path(tmp), env={"LOG_LEVEL": "WARNING"}, script=script)
        proc.start()
        try:
            await proc.wait_ready(timeout=60)
            startup_log = len(proc.log())
            result = await drive(name, proc.ws_url, args)
        finally:
            exit_code = proc.stop()
        result.exit_code = exit_code
        # Only what was logged from readiness on: start-up notices are not the benchmark's.
        logged = proc.log()[startup_log:]
        result.log_lines = [line for line in logged.splitlines() if line.strip()]
        if name == "pallas":
            result.db_rows, result.db_ids_match = check_db(proc.db_path, result.sent_ids)
        return result


def check_db(db_path: Path, sent_ids: Sequence[int]) -> tuple[int, bool]:
    """Row count of `message`, and whether its platform ids are exactly the ids sent."""
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute("SELECT platform_message_id FROM message").fetchall()
    stored = sorted(str(row[0]) for row in rows)
    return len(rows), stored == sorted(str(mid) for mid in sent_ids)


# Report ---------------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def fmt(value: float | int | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    return "nan" if math.isnan(value) else f"{value:.{digits}f}"


def report(bot: TargetResult, bare: TargetResult, args: argparse.Namespace) -> None:
    print(
        f"ingress benchmark  python {platform.python_version()}, {os.cpu_count()} cpu(s); "
        f"{PEOPLE} people in {GROUPS} groups; warm-up {args.warmup} msgs"
    )
    print(
        f"burst {args.burst} msgs as fast as possible; steady {fmt(args.rate, 0)} msg/s "
        f"for {fmt(args.seconds, 0)} s\n"
    )
    rows: list[tuple[str, Any, Any]] = [
        ("burst messages/s", bot.burst.messages_per_s, bare.burst.messages_per_s),
        ("burst p50 ms", bot.burst.p50_ms, bare.burst.p50_ms),
        ("burst p99 ms", bot.burst.p99_ms, bare.burst.p99_ms),
        ("steady p50 ms", bot.steady.p50_ms, bare.steady.p50_ms),
        ("steady p99 ms", bot.steady.p99_ms, bare.steady.p99_ms),
        ("steady max send lag ms", bot.steady.max_send_lag_ms, bare.steady.max_send_lag_ms),
        ("messages sent", len(bot.sent_ids), len(bare.sent_ids)),
        ("acks missing", bot.acks_missing, bare.acks_missing),
        ("duplicate acks", bot.duplicate_acks, bare.duplicate_acks),
        ("rows in message table", bot.db_rows, None),
        ("log lines after start-up", len(bot.log_lines), len(bare.log_lines)),
        ("exit code after SIGINT", bot.exit_code, bare.exit_code),
    ]
    print(f"{'':28}{'pallas':>12}{'bare':>12}")
    for label, a, b in rows:
        print(f"{label:28}{fmt(a):>12}{fmt(b):>12}")
    ratio = bot.burst.messages_per_s / bare.burst.messages_per_s
    print()
    print(
        f"ratio bot/bare messages/s  {ratio:.2f}   target >= {TARGET_RATIO}   "
        f"{verdict(ratio >= TARGET_RATIO)}"
    )
    print(
        f"bot steady p99 ms          {bot.steady.p99_ms:.1f}   target <= {TARGET_P99_MS:.0f}"
        f"     {verdict(bot.steady.p99_ms <= TARGET_P99_MS)}"
    )
    for target in (bot, bare):
        for line in target.log_lines[:5]:
            print(f"[{target.name} log] {line}")
    ids_note = "" if bot.db_ids_match is None else f", ids match: {bot.db_ids_match}"
    print(
        f"\nmessages lost: {'YES' if bot.lost or bare.lost else 'none'}"
        f" (pallas rows {fmt(bot.db_rows)} of {len(bot.sent_ids)} sent{ids_note})"
    )


# Entry ----------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=5000, help="burst size (messages)")
    parser.add_argument("--rate", type=float, default=300.0, help="steady rate (messages/s)")
    parser.add_argument("--seconds", type=float, default=10.0, help="steady duration (s)")
    parser.add_argument("--warmup", type=int, default=100, help="warm-up messages (untimed)")
    args = parser.parse_args(argv)
    if args.burst < 1 or args.rate <= 0 or args.seconds <= 0 or args.warmup < 0:
        parser.error("--burst, --rate and --seconds must be positive, --warmup >= 0")
    return args


async def amain(args: argparse.Namespace) -> int:
    bot = await bench_target("pallas", BENCH_DIR / "run_pallas.py", args)
    bare = await bench_target("bare", BENCH_DIR / "run_bare.py", args)
    report(bot, bare, args)
    return 1 if bot.lost or bare.lost else 0


def main() -> None:
    sys.exit(asyncio.run(amain(parse_args())))


if __name__ == "__main__":
    main()
