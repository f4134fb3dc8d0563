"""Model-manager benchmark: short completions through the manager vs straight through the SDK.

A fake OpenAI-compatible server (`tests/support/fake_llm.py`, a real HTTP server) runs in a
child process so it does not share the event loop being measured. In one run, the same
number of short non-streamed completions go through `ModelManager.chat` (with everything it
does in the bot: candidate order, breaker, cost, a usage row through `LlmUsageWriter` into a
migrated SQLite file, the call-log record handed to its writer thread, one summary line on the
main log, here a file sink) and straight through `AsyncOpenAI`, in alternating blocks so drift
hits both alike. A manager block's timer stops only once that block's bookkeeping is done: its
usage rows committed (`LlmUsageWriter.flush`) and its call-log records written
(`CallLog.flush`). It prints per-call p50/p99/mean for each path, the time ratio manager/SDK
per block pair (median; target <= 1.1) and in total, and the manager's overhead per call.

Run from the repository root: `.venv/bin/python bench/provider_bench.py [--calls 500]
[--block 50] [--warmup 50] [--loop uvloop|asyncio] [--no-main-log] [--no-bookkeeping]`.
`--no-bookkeeping` times the manager's own logic: no usage row, call log or summary line.
Exits 1 if any call failed or a usage row is missing.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import openai  # noqa: E402
from loguru import logger  # noqa: E402
from sqlalchemy import func, select  # noqa: E402
from sqlalchemy.ext.asyncio import AsyncEngine  # noqa: E402

from bench.loops import add_loop_option, pick_runner  # noqa: E402
from bench.machine import machine_line  # noqa: E402
from pallas.providers.call_log import CallLog  # noqa: E402
from pallas.providers.catalog import Catalog, ModelSpec, ModelType, Pricing, ProviderSpec  # noqa: E402
from pallas.providers.manager import ManagerDeps, ModelManager  # noqa: E402
from pallas.providers.openai_wire import ChatRequest  # noqa: E402
from pallas.providers.results import CallTag, Purpose  # noqa: E402
from pallas.store.engine import create_engine  # noqa: E402
from pallas.store.llm_usage import LlmUsageWriter  # noqa: E402
from pallas.store.migrate import upgrade_to_head  # noqa: E402
from pallas.store.models import LlmCall  # noqa: E402

SERVER = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
from tests.support.fake_llm import FakeModelServer

async def main():
    async with FakeModelServer() as server:
        print(server.port, flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""

MESSAGES = [
    {"role": "system", "content": "你是群里的一员，说话简短。"},
    {"role": "user", "content": "[#101 小明] 今晚有人一起打游戏吗"},
]
UPSTREAM = "bench-model"
TARGET_RATIO = 1.05


def start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(REPO_ROOT)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    return proc, f"http://127.0.0.1:{port}/v1"


def build_catalog(base_url: str) -> Catalog:
    provider = ProviderSpec("bench", base_url, ("sk-bench",), (), 30.0)
    spec = ModelSpec(
        "bench/chat",
        UPSTREAM,
        "bench",
        frozenset({ModelType.CHAT}),
        pricing=Pricing(2.0, 8.0, 0.5),
    )
    return Catalog((provider,), (spec,))


async def through_manager(manager: ModelManager, tag: CallTag) -> float:
    started = time.perf_counter()
    result = await manager.chat(ChatRequest(MESSAGES), tag=tag)
    assert result.text
    return time.perf_counter() - started


async def through_sdk(client: openai.AsyncOpenAI) -> float:
    started = time.perf_counter()
    response = await client.chat.completions.create(model=UPSTREAM, messages=MESSAGES)  # type: ignore[arg-type]
    assert response.choices[0].message.content and response.usage is not None
    return time.perf_counter() - started


@dataclass
class Block:
    """One block of calls on one path."""

    calls: list[float]  # per call, request to result (s)
    wall_s: float  # the whole block; a manager block includes its bookkeeping
    cpu_s: float  # process CPU over the same span (all threads)


@dataclass
class Pair:
    manager: Block
    sdk: Block

    @property
    def ratio(self) -> float:
        return self.manager.wall_s / self.sdk.wall_s

    @property
    def overhead_us(self) -> float:
        return (self.manager.wall_s - self.sdk.wall_s) / len(self.manager.calls) * 1e6


@dataclass
class Rig:
    manager: ModelManager
    client: openai.AsyncOpenAI
    usage: LlmUsageWriter
    call_log: CallLog
    engine: AsyncEngine
    tag: CallTag
    bookkeeping: bool = True  # False: the manager without usage rows, call log or summary line


async def settle_bookkeeping(rig: Rig) -> None:
    """Until every usage row recorded so far is committed and every call-log record written."""
    await rig.usage.flush()
    rig.call_log.flush()  # blocks the loop until the writer thread is done: nothing else runs


async def manager_block(rig: Rig, size: int) -> Block:
    cpu0, t0 = time.process_time(), time.perf_counter()
    calls = [await through_manager(rig.manager, rig.tag) for _ in range(size)]
    await settle_bookkeeping(rig)  # the block's bookkeeping is charged to the block
    return Block(calls, time.perf_counter() - t0, time.process_time() - cpu0)


async def sdk_block(rig: Rig, size: int) -> Block:
    cpu0, t0 = time.process_time(), time.perf_counter()
    calls = [await through_sdk(rig.client) for _ in range(size)]
    return Block(calls, time.perf_counter() - t0, time.process_time() - cpu0)


async def usage_rows(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(LlmCall))).scalar() or 0)


async def run_pairs(rig: Rig, calls: int, block: int, warmup: int) -> tuple[list[Pair], int]:
    """Alternating blocks until `calls` went through each path; (pairs, manager blocks whose
    usage rows were not all committed when their timer stopped)."""
    pairs: list[Pair] = []
    late_blocks = done = 0

    async def checked_manager_block(size: int) -> Block:
        nonlocal late_blocks
        timed = await manager_block(rig, size)
        # Untimed, at once (before the writer's 0.5 s timer could commit stragglers).
        expected = warmup + done + size if rig.bookkeeping else 0
        late_blocks += await usage_rows(rig.engine) != expected
        return timed

    while done < calls:
        size = min(block, calls - done)
        # Alternate which path goes first: the first block after an idle moment is slower.
        if len(pairs) % 2 == 0:
            mgr = await checked_manager_block(size)
            sdk = await sdk_block(rig, size)
        else:
            sdk = await sdk_block(rig, size)
            mgr = await checked_manager_block(size)
        done += size
        pairs.append(Pair(mgr, sdk))
    return pairs, late_blocks


def describe(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"  {name:<8} calls {len(samples):>5}  p50 {statistics.median(ordered) * 1e3:6.3f} ms  "
        f"p99 {p99 * 1e3:6.3f} ms  mean {statistics.fmean(ordered) * 1e3:6.3f} ms"
    )


def spread(values: list[float], digits: int) -> str:
    """'median (min-max)' of per-block figures."""
    return (
        f"{statistics.median(values):.{digits}f} "
        f"({min(values):.{digits}f}-{max(values):.{digits}f})"
    )


def report(pairs: list[Pair], calls: int) -> None:
    managed = [t for p in pairs for t in p.manager.calls]
    direct = [t for p in pairs for t in p.sdk.calls]
    print(
        f"\n{len(pairs)} block pairs of up to {len(pairs[0].manager.calls)} calls each; a manager "
        "block is timed from its first call until its usage rows are committed and its call-log "
        "records written; an sdk block until its last result"
    )
    print("per call, request to result (the bookkeeping after a block is not in these):")
    print(describe("manager", managed))
    print(describe("sdk", direct))
    ratios = [p.ratio for p in pairs]
    total = sum(p.manager.wall_s for p in pairs) / sum(p.sdk.wall_s for p in pairs)
    median_ratio = statistics.median(ratios)
    print(
        f"ratio manager/sdk, block time: median of the per-pair ratios {spread(ratios, 3)}   "
        f"target <= {TARGET_RATIO}   {'PASS' if median_ratio <= TARGET_RATIO else 'MISS'}"
    )
    print(f"ratio manager/sdk, total time of all blocks {total:.3f}")
    overhead = [p.overhead_us for p in pairs]
    overall = (sum(p.manager.wall_s for p in pairs) - sum(p.sdk.wall_s for p in pairs)) / calls
    print(
        f"manager overhead per call, wall, bookkeeping included: median per pair "
        f"{spread(overhead, 0)} µs; over all blocks {overall * 1e6:.0f} µs"
    )
    calls_only = (sum(managed) - sum(direct)) / calls
    print(f"  the same from the per-call times alone (no bookkeeping) {calls_only * 1e6:.0f} µs")
    cpu = {
        name: [getattr(p, name).cpu_s / len(getattr(p, name).calls) * 1e6 for p in pairs]
        for name in ("manager", "sdk")
    }
    own = [m - s for m, s in zip(cpu["manager"], cpu["sdk"], strict=True)]
    print(
        f"process CPU per call, median over blocks (min-max): manager {spread(cpu['manager'], 0)} "
        f"µs, sdk {spread(cpu['sdk'], 0)} µs; manager's own, per pair {spread(own, 0)} µs "
        "(usage row, call log, summary line)"
    )


async def open_rig(base_url: str, workdir: Path, main_log: bool, bookkeeping: bool = True) -> Rig:
    logger.remove()
    if main_log and bookkeeping:
        logger.add(workdir / "main.log", level="INFO")
    engine = create_engine(f"sqlite+aiosqlite:///{workdir / 'bench.db'}")
    await upgrade_to_head(engine)
    usage = LlmUsageWriter(engine)
    usage.start()
    call_log = CallLog(workdir / "logs" / "llm", started_at=datetime.now(UTC))
    call_log.open()
    deps = ManagerDeps(usage=usage.record, call_log=call_log) if bookkeeping else ManagerDeps()
    manager = ModelManager(build_catalog(base_url), deps)
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0, timeout=30)
    tag = CallTag(Purpose.DECISION, stream_key="group:bench")
    return Rig(manager, client, usage, call_log, engine, tag, bookkeeping)


async def close_rig(rig: Rig) -> None:
    await rig.manager.close()
    await rig.client.close()
    await rig.usage.close()
    rig.call_log.close()
    await rig.engine.dispose()


async def run(
    calls: int, block: int, warmup: int, workdir: Path, main_log: bool, bookkeeping: bool
) -> int:
    proc, base_url = start_server()
    rig = await open_rig(base_url, workdir, main_log, bookkeeping)
    try:
        for _ in range(warmup):
            await through_manager(rig.manager, rig.tag)
            await through_sdk(rig.client)
        await settle_bookkeeping(rig)  # the warm-up's bookkeeping stays out of the first block
        # As the bot does once started: the long-lived heap leaves the collector's passes.
        gc.collect()
        gc.freeze()
        pairs, late_blocks = await run_pairs(rig, calls, block, warmup)
        rows = await usage_rows(rig.engine)
    finally:
        await close_rig(rig)
        proc.terminate()
        proc.wait()
    print(f"openai {openai.__version__}")
    report(pairs, calls)
    expected = warmup + calls if bookkeeping else 0
    print(
        f"usage rows {rows} (expected {expected}); blocks whose rows were not all "
        f"committed when their timer stopped: {late_blocks}"
    )
    return 0 if rows == expected and not late_blocks else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=50)
    add_loop_option(parser)
    parser.add_argument(
        "--no-main-log",
        action="store_true",
        help="drop the main-log sink, to see what the per-call summary line costs",
    )
    parser.add_argument(
        "--no-bookkeeping",
        action="store_true",
        help="the manager without usage rows, call log or summary line: its own logic only",
    )
    args = parser.parse_args()
    if min(args.calls, args.block) < 1 or args.warmup < 0:
        parser.error("--calls and --block must be positive, --warmup >= 0")
    loop_name, runner = pick_runner(args.loop)
    print(machine_line("at start", loop_name))
    with tempfile.TemporaryDirectory(prefix="pallas-provider-bench-") as tmp:
        code = runner(
            run(
                args.calls,
                args.block,
                args.warmup,
                Path(tmp),
                not args.no_main_log,
                not args.no_bookkeeping,
            )
        )
    print(machine_line("at end", loop_name))
    sys.exit(code)


if __name__ == "__main__":
    main()
