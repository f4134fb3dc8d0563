"""Text-protocol parser benchmark: how long adversarial model output takes to parse.

The parser reads what a model without tool calling wrote; a reply crafted (or garbled) to
make a scanner backtrack must not stall a turn. Each input is parsed `--repeat` times; the
median and the worst are printed against the target (every parse under 1 s).

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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.machine import machine_line
from pallas.product.llm.agent.text_protocol import (
    FunctionSpec,
    ParamSpec,
    ParamType,
    parse_text_actions,
)

TARGET_S = 1.0  # about 3x the slowest input today: a backtracking regression crosses it
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(machine_line("at start"))
    worst_overall = 0.0
    for name, text in adversarial().items():
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            parse_text_actions(text, FUNCTIONS)
            times.append(time.perf_counter() - started)
        worst_overall = max(worst_overall, max(times))
        print(
            f"{name:<40} median {statistics.median(times) * 1e3:8.1f} ms"
            f"   worst {max(times) * 1e3:8.1f} ms"
        )
    verdict = "PASS" if worst_overall < TARGET_S else "MISS"
    print(
        f"worst parse {worst_overall * 1e3:.1f} ms   target < {TARGET_S * 1e3:.0f} ms   {verdict}"
    )
    print(machine_line("at end"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
