"""Start-up of the real bot: how long `python bot.py` takes until its health endpoint answers,
the CPU its process used by then and its resident memory, on a fresh data dir (migrations
run) and again on the same data dir (the store already at its head).

With `--against PATH` (another checkout of this repository, e.g. a `git worktree` of an
earlier commit) the two are started in alternating order, round by round, so both see the
same machine; medians per checkout are printed side by side with the ratio.

Run from the repository root: `.venv/bin/python bench/startup_bench.py [--rounds 5]
[--against /tmp/base]`.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.machine import machine_line  # noqa: E402

READY_TIMEOUT_S = 60.0
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Start:
    wall_s: float  # spawn -> health answers 200
    cpu_s: float  # the process's user + system time at that moment
    rss_mb: float  # its resident memory then (VmRSS)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/pallas/api/health", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def start_once(repo: Path, data_dir: Path) -> Start:
    port = free_port()
    env = {
        **os.environ,
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "PALLAS_DATA_DIR": str(data_dir),
        "LOG_LEVEL": "WARNING",
        "ONEBOT_ACCESS_TOKEN": "startup-bench",
    }
    for key in ("LLM_BASE_URL", "LLM_API_KEY", "LLM_MODEL", "PALLAS_PROVIDERS_FILE"):
        env.pop(key, None)
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "bot.py"], cwd=data_dir, env=env | {"PYTHONPATH": str(repo)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        return _wait(proc, port, started)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _wait(proc: subprocess.Popen[bytes], port: int, started: float) -> Start:
    while time.monotonic() - started < READY_TIMEOUT_S:
        if proc.poll() is not None:
            raise RuntimeError(f"bot exited with {proc.returncode} before it was ready")
        if healthy(port):
            return Start(time.monotonic() - started, cpu_seconds(proc.pid), rss_mb(proc.pid))
        time.sleep(0.02)
    raise TimeoutError("bot not ready in time")


def one_round(repo: Path) -> tuple[Start, Start]:
    """A fresh data dir, then the same one again."""
    with tempfile.TemporaryDirectory(prefix="pallas-startup-") as tmp:
        data = Path(tmp)
        (data / "bot.py").symlink_to(repo / "bot.py")
        (data / "config").symlink_to(repo / "config")
        return start_once(repo, data), start_once(repo, data)


def median_line(label: str, values: dict[str, list[float]], scale: float, unit: str) -> str:
    meds = {name: statistics.median(v) * scale for name, v in values.items()}
    cells = "".join(f"{m:>12.0f}" for m in meds.values())
    ratio = ""
    if len(meds) == 2:
        first, second = meds.values()
        ratio = f"{first / second:>10.3f}" if second else ""
    return f"  {label:<34}{cells}{ratio}   {unit}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", type=Path, help="another checkout to compare with")
    args = parser.parse_args()
    repos = {"this": REPO_ROOT} | ({"against": args.against.resolve()} if args.against else {})
    print(machine_line("at start"))
    results: dict[str, list[tuple[Start, Start]]] = {name: [] for name in repos}
    for round_no in range(args.rounds):
        order = list(repos) if round_no % 2 == 0 else list(reversed(repos))
        for name in order:
            fresh, again = one_round(repos[name])
            results[name].append((fresh, again))
            print(f"round {round_no + 1} {name:<8} fresh {fresh.wall_s:.2f} s "
                  f"(cpu {fresh.cpu_s:.2f}), again {again.wall_s:.2f} s (cpu {again.cpu_s:.2f})")
    ratio = "  (ratio: this / against)" if args.against else ""
    print(f"\nmedians over {args.rounds} rounds{ratio}")
    print(f"  {'':<34}" + "".join(f"{name:>12}" for name in repos))
    for label, pick in (
        ("fresh data dir: ready, ms", lambda s: s[0].wall_s),
        ("fresh data dir: CPU, ms", lambda s: s[0].cpu_s),
        ("store at head: ready, ms", lambda s: s[1].wall_s),
        ("store at head: CPU, ms", lambda s: s[1].cpu_s),
    ):
        values = {name: [pick(s) for s in runs] for name, runs in results.items()}
        print(median_line(label, values, 1000, "ms"))
    values = {name: [s[1].rss_mb * 1000 for s in runs] for name, runs in results.items()}
    print(median_line("store at head: RSS when ready, kB", values, 1, "kB"))
    print(machine_line("at end"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
