"""Idle CPU: what the real bot uses with no traffic and no NapCat, beside a bare NoneBot.

Both run as child processes at once (`run_pallas.py`, the bot as `bot.py` builds it, and
`run_bare.py`), each on a fresh temporary data dir, with nobody connected. Once both answer
their health endpoint and `--settle` seconds have passed (start-up work done), the CPU of
each process tree (user + system of the child and its descendants, from `/proc`) is read once
a second for `--seconds` seconds. It prints, per process, the CPU per second of wall time:
mean, median and the busiest second, and the share of seconds that used any CPU at all. The
kernel counts CPU in clock ticks (10 ms here), so a single second reads 0 or 10 ms; the mean
over the run is what to compare.
Target: the bot's own idle CPU, its mean beyond the bare NoneBot's in the same run, <= 1 ms
per second (PASS or MISS); the bare server's own timer (uvicorn's) is the floor both share.

Run from the repository root: `.venv/bin/python bench/idle_bench.py [--seconds 120]
[--settle 5]`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.ingress_bench import SCRIPTS, ChildBot, tree_cpu_s  # noqa: E402
from bench.machine import machine_line  # noqa: E402

TARGET_MS_PER_S = 1.0


@dataclass(frozen=True)
class Idle:
    name: str
    per_second_ms: list[float]  # CPU ms used in each sampled second

    @property
    def mean(self) -> float:
        return statistics.fmean(self.per_second_ms)

    @property
    def busy_share(self) -> float:
        return sum(1 for v in self.per_second_ms if v > 0) / len(self.per_second_ms)


async def sample(pids: dict[str, int], seconds: int) -> dict[str, Idle]:
    """CPU ms per second of each tree, on an absolute one-second schedule."""
    readings = {name: [tree_cpu_s(pid)] for name, pid in pids.items()}
    start = time.monotonic()
    for tick in range(1, seconds + 1):
        await asyncio.sleep(max(0.0, start + tick - time.monotonic()))
        for name, pid in pids.items():
            readings[name].append(tree_cpu_s(pid))
    return {
        name: Idle(name, [(b - a) * 1000 for a, b in itertools.pairwise(values)])
        for name, values in readings.items()
    }


async def run(args: argparse.Namespace) -> dict[str, Idle]:
    with tempfile.TemporaryDirectory(prefix="pallas-idle-") as tmp:
        bots = {
            name: ChildBot(Path(tmp) / name, env={"LOG_LEVEL": "WARNING"}, script=script)
            for name, script in SCRIPTS.items()
        }
        for name, bot in bots.items():
            (Path(tmp) / name).mkdir()
            bot.start()
        try:
            for bot in bots.values():
                await bot.wait_ready(timeout=60)
            await asyncio.sleep(args.settle)
            return await sample({name: bot.pid for name, bot in bots.items()}, args.seconds)
        finally:
            for bot in bots.values():
                bot.stop()


def report(results: dict[str, Idle], seconds: int) -> int:
    print(f"\nidle CPU over {seconds} s, per second of wall time")
    print(f"  {'':<10}{'mean ms':>10}{'median ms':>11}{'busiest ms':>12}{'busy s':>9}")
    for idle in results.values():
        values = idle.per_second_ms
        print(f"  {idle.name:<10}{idle.mean:>10.2f}{statistics.median(values):>11.2f}"
              f"{max(values):>12.2f}{idle.busy_share:>9.0%}")  # fmt: skip
    bot, bare = results["pallas"].mean, results["bare"].mean
    over = bot - bare  # the bare server's own ticks (uvicorn's) are the floor both share
    verdict = "PASS" if over <= TARGET_MS_PER_S else "MISS"
    print(f"\n  bot idle CPU {bot:.2f} ms/s, bare {bare:.2f} ms/s: the bot's own {over:.2f} ms/s"
          f"   target <= {TARGET_MS_PER_S:g}  {verdict}")  # fmt: skip
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=120, help="seconds sampled")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after ready")
    args = parser.parse_args()
    print(machine_line("at start"))
    results = asyncio.run(run(args))
    code = report(results, args.seconds)
    print(machine_line("at end"))
    return code


if __name__ == "__main__":
    sys.exit(main())
