"""One line describing the machine at the moment of measuring.

Every benchmark prints it when it starts and again next to its results: a figure means little
without the CPU it ran on and how busy that CPU was (the load average at the end covers the
run itself).
"""

from __future__ import annotations

import os
import platform
import sqlite3
import time
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
PROC_STAT = Path("/proc/stat")
STEAL_SAMPLE_S = 0.5


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo, else whatever `platform` knows."""
    try:
        for line in CPUINFO.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _cpu_times() -> list[int] | None:
    try:
        first = PROC_STAT.read_text(encoding="ascii").splitlines()[0].split()
    except (OSError, IndexError):
        return None
    return [int(field) for field in first[1:]]


def steal_share(sample_s: float = STEAL_SAMPLE_S) -> str:
    """CPU time the hypervisor gave to someone else over a short sample: a virtual machine's
    load average stays low while its host is busy, and this is what shows it."""
    before = _cpu_times()
    time.sleep(sample_s)
    after = _cpu_times()
    if before is None or after is None or len(before) < 8:
        return "steal unknown"
    deltas = [b - a for a, b in zip(before, after, strict=True)]
    total = sum(deltas[:8])
    share = deltas[7] / total if total else 0.0
    return f"cpu steal {share:.0%} over {sample_s:.1f} s"


def machine_line(when: str, loop: str | None = None) -> str:
    """E.g. `machine (at start): Intel(R) Xeon(R) ...; 2 logical cores; load 0.93 ...`."""
    one, five, fifteen = os.getloadavg()
    parts = [
        cpu_model(),
        f"{os.cpu_count()} logical cores",
        f"load {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)",
        steal_share(),
        f"python {platform.python_version()}",
        f"sqlite {sqlite3.sqlite_version}",
    ]
    if loop is not None:
        parts.append(f"loop {loop}")
    return f"machine ({when}): " + "; ".join(parts)
