"""Model-manager benchmark: short completions through the manager vs straight through the SDK.

A fake OpenAI-compatible server (`tests/support/fake_llm.py`, a real HTTP server) runs in a
child process so it does not share the event loop being measured. In one run, the same
number of short non-streamed completions go through `ModelManager.chat` (with everything it
does in the bot: candidate order, breaker, cost, a usage row through the group-committed
writer into a migrated SQLite file, the call-log record handed to its writer thread, one
summary line on the main log, here a file sink) and straight through `AsyncOpenAI`, in
alternating blocks so drift hits both alike. It prints per-call p50/p99/mean for each path,
the time ratio manager/SDK (target <= 1.1) and the manager's overhead per call.

Run from the repository root: `.venv/bin/python bench/provider_bench.py [--calls 500]
[--block 50] [--warmup 50] [--loop uvloop|asyncio] [--no-main-log]`. Exits 1 if any call
failed or a usage row is missing.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import openai  # noqa: E402
from loguru import logger  # noqa: E402
from sqlalchemy import func, select  # noqa: E402

from bench.loops import add_loop_option, pick_runner  # noqa: E402
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


def describe(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"{name:<8} calls {len(samples):>5}  p50 {statistics.median(ordered) * 1e3:6.3f} ms  "
        f"p99 {p99 * 1e3:6.3f} ms  mean {statistics.fmean(ordered) * 1e3:6.3f} ms"
    )


async def run(calls: int, block: int, warmup: int, workdir: Path, main_log: bool) -> int:
    proc, base_url = start_server()
    logger.remove()
    if main_log:
        logger.add(workdir / "main.log", level="INFO")
    engine = create_engine(f"sqlite+aiosqlite:///{workdir / 'bench.db'}")
    await upgrade_to_head(engine)
    usage = LlmUsageWriter(engine)
    usage.start()
    call_log = CallLog(workdir / "logs" / "llm", started_at=datetime.now(UTC))
    call_log.open()
    manager = ModelManager(
        build_catalog(base_url), ManagerDeps(usage=usage.record, call_log=call_log)
    )
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0, timeout=30)
    tag = CallTag(Purpose.DECISION, stream_key="group:bench")
    try:
        for _ in range(warmup):
            await through_manager(manager, tag)
            await through_sdk(client)
        # As the bot does once started: the long-lived heap leaves the collector's passes.
        gc.collect()
        gc.freeze()
        managed: list[float] = []
        direct: list[float] = []
        cpu = {"manager": 0.0, "sdk": 0.0}
        rounds = 0
        while len(managed) < calls:
            size = min(block, calls - len(managed))
            # Alternate which path goes first: the first block after an idle flush is slower.
            order = ("manager", "sdk") if rounds % 2 == 0 else ("sdk", "manager")
            for path in order:
                started = time.process_time()
                if path == "manager":
                    managed.extend([await through_manager(manager, tag) for _ in range(size)])
                    await usage.flush()  # the block's bookkeeping is charged to the block
                    call_log.flush()
                else:
                    direct.extend([await through_sdk(client) for _ in range(size)])
                cpu[path] += time.process_time() - started
            rounds += 1
        await usage.flush()
        async with engine.connect() as conn:
            rows = (await conn.execute(select(func.count()).select_from(LlmCall))).scalar()
    finally:
        await manager.close()
        await client.close()
        await usage.close()
        call_log.close()
        await engine.dispose()
        proc.terminate()
        proc.wait()
    ratio = sum(managed) / sum(direct)
    overhead_us = (statistics.fmean(managed) - statistics.fmean(direct)) * 1e6
    print(
        f"python {platform.python_version()}, openai {openai.__version__}, {os.cpu_count()} cores"
    )
    print(describe("manager", managed))
    print(describe("sdk", direct))
    verdict = "PASS" if ratio <= 1.1 else "MISS"
    print(f"ratio manager/sdk {ratio:.3f} (target <= 1.1: {verdict})")
    print(f"manager overhead per call {overhead_us:.0f} µs (wall)")
    cpu_us = {name: seconds / calls * 1e6 for name, seconds in cpu.items()}
    print(
        f"process CPU per call: manager {cpu_us['manager']:.0f} µs, sdk {cpu_us['sdk']:.0f} µs, "
        f"manager's own {cpu_us['manager'] - cpu_us['sdk']:.0f} µs (usage row, call log, summary)"
    )
    print(f"usage rows {rows} (expected {warmup + calls})")
    return 0 if rows == warmup + calls else 1


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
    args = parser.parse_args()
    loop_name, runner = pick_runner(args.loop)
    print(f"loop {loop_name}")
    with tempfile.TemporaryDirectory(prefix="pallas-provider-bench-") as tmp:
        sys.exit(runner(run(args.calls, args.block, args.warmup, Path(tmp), not args.no_main_log)))


if __name__ == "__main__":
    main()
