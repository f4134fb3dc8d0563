"""Model-output benchmark: how long adversarial model output takes to parse and to shape.

The parser reads what a model without tool calling wrote, and reply shaping cleans and splits
every reply text; a reply crafted (or garbled) to make a pattern backtrack must not stall a
turn. Each input is handled `--repeat` times; the median and the worst are printed against
the targets (every parse under 1 s; every 1 MB reply shaped under SHAPE_TARGET_S).

Run from the repository root: `.venv/bin/python bench/text_protocol_bench.py [--repeat N]`.
Speed targets only print PASS or MISS.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.machine import machine_line
from pallas.product.llm.agent.output import shape_reply, split_into_bubbles
from pallas.product.llm.agent.text_protocol import (
    FunctionSpec,
    ParamSpec,
    ParamType,
    parse_text_actions,
)

TARGET_S = 1.0  # about 3x the slowest input today: a backtracking regression crosses it
SHAPE_TARGET_S = 4.0  # about 2.5x the slowest 1 MB reply today (1.6 s): linear, not backtracking
MEGABYTE = 1_000_000
FUNCTIONS = (
    FunctionSpec(
        "reply",
        (
            ParamSpec("text", ParamType.STR, required=True),
            ParamSpec("target_message_id", ParamType.INT),
        ),
    ),
    FunctionSpec("silent", (ParamSpec("reason", ParamType.STR, required=True),)),
    FunctionSpec("wait", (ParamSpec("seconds", ParamType.INT),)),
)


def adversarial() -> dict[str, str]:
    garbage_alphabet = "()[]{}（）【】,，=:＝：\"'“”‘’「」`\\<>|｜▁/ \nreply wait text=1 true 好的"
    rng = random.Random(20240601)
    return {
        "10,000 unclosed parentheses": "reply(" + "(" * 10_000,
        "balanced 10,000 deep": "```\nreply(text=" + "(" * 10_000 + ")" * 10_001 + "\n```",
        "JSON array 10,000 deep": "```json\n" + "[" * 10_000 + "]" * 10_000 + "\n```",
        "100 KB of open braces": "{" * 100_000,
        "100 KB unterminated string": 'reply(text="' + "啊" * 100_000,
        "many unterminated calls": 'reply("' * 15_000,
        "100 KB of fences": "```" * 33_000,
        "unclosed markup": '<invoke name="reply"><parameter name="text">' * 2_000,
        "DeepSeek tokens": "<｜tool▁calls▁begin｜>" * 5_000,
        "100,000 commas": "reply(" + "," * 100_000 + ")",
        "huge number": "reply(text=1, target_message_id=" + "9" * 50_000 + ")",
        "trailing backslashes": 'reply(text="' + "\\" * 100_001,
        "100 KB of random protocol characters": "".join(
            rng.choice(garbage_alphabet) for _ in range(100_000)
        ),
    }


def hostile_replies() -> dict[str, str]:
    """1 MB replies built to trip naive patterns in reply shaping (output.py)."""
    return {
        "chinese prose": "今天天气不错。" * (MEGABYTE // 7),
        "spaces then a word": " " * MEGABYTE + "好",
        "newlines": "\n" * MEGABYTE + "好",
        "angle brackets": "<" * MEGABYTE,
        "unclosed tool tags": "<tool_call " * (MEGABYTE // 11),
        "unclosed tool block": "好\n<tool_call>" + "{" * MEGABYTE,
        "unclosed bracket markers": "[表情:" * (MEGABYTE // 4),
        "think closers": "</think>" * (MEGABYTE // 8),
        "fences": "```\n" * (MEGABYTE // 4),
        "special token openers": "<|" * (MEGABYTE // 2),
        "ids": "#1" * (MEGABYTE // 2),
        "url": "https://" + "a" * MEGABYTE,
        "mixed lines": "[#12] 牛牛：<say>好[表情:开心]</say>「引用。」https://a.cn/?x=1!\n"
        * (MEGABYTE // 50),
    }


def _shape(text: str) -> None:
    shape_reply(text, bot_names=("牛牛",), max_bubbles=4, max_chars=1500)
    split_into_bubbles(text, max_bubbles=4)


def time_each(inputs: dict[str, str], handle: Callable[[str], object], repeat: int) -> float:
    """Print each input's median and worst; return the worst of all, in seconds."""
    worst_overall = 0.0
    for name, text in inputs.items():
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            handle(text)
            times.append(time.perf_counter() - started)
        worst_overall = max(worst_overall, max(times))
        print(
            f"{name:<40} median {statistics.median(times) * 1e3:8.1f} ms"
            f"   worst {max(times) * 1e3:8.1f} ms"
        )
    return worst_overall


def verdict_line(what: str, worst: float, target: float) -> str:
    verdict = "PASS" if worst < target else "MISS"
    return f"worst {what} {worst * 1e3:.1f} ms   target < {target * 1e3:.0f} ms   {verdict}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(machine_line("at start"))
    print("parsing (text protocol)")
    worst_parse = time_each(
        adversarial(), lambda text: parse_text_actions(text, FUNCTIONS), args.repeat
    )
    print("shaping (reply text)")
    worst_shape = time_each(hostile_replies(), _shape, args.repeat)
    print(verdict_line("parse", worst_parse, TARGET_S))
    print(verdict_line("shape", worst_shape, SHAPE_TARGET_S))
    print(machine_line("at end"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
