"""The event-loop choice every benchmark offers: uvloop (what the bot runs under) or asyncio."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import Any

try:
    import uvloop
except ImportError:  # optional: the benchmarks fall back to asyncio and say so
    uvloop = None  # type: ignore[assignment]

Runner = Callable[[Any], Any]


def add_loop_option(parser: argparse.ArgumentParser, help_text: str = "") -> None:
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help=help_text or "event loop (the real bot runs under uvicorn, i.e. uvloop)",
    )


def pick_runner(name: str) -> tuple[str, Runner]:
    """(a label for the report, the function that runs the benchmark's coroutine)."""
    if name != "uvloop":
        return "asyncio", asyncio.run
    if uvloop is None:
        return "asyncio (uvloop not installed)", asyncio.run
    return "uvloop", uvloop.run
