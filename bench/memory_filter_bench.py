"""Memory's candidate filter on the labelled corpus: recall and pass rate.

The corpus (tests/fixtures/memory_lines.tsv) holds Chinese group-chat lines labelled `keep`
(worth remembering a week later: about the speaker, the group or the bot's manners) or `skip`
(chatter, passing states, requests, questions, links). It is split with a fixed seed into a
tuning half and a held-out half (tests/support/memory_corpus.py); the filter's rules were
written against the tuning half. Targets, on the held-out half: recall >= 95 % of the `keep`
lines, pass rate <= 35 % of the `skip` lines (the model decides the rest).

Run from the repository root: `.venv/bin/python bench/memory_filter_bench.py [--misses]`.
Prints both halves and PASS or MISS per target; `--misses` lists the lines it gets wrong.
Exits 0 unless something fails; the targets only print.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pallas.product.memory.candidates import is_candidate
from tests.support.memory_corpus import Line, corpus_lines, score, split

RECALL_TARGET = 0.95
PASS_TARGET = 0.35


def _report(name: str, lines: list[Line], misses: bool) -> tuple[float, float]:
    result = score(lines, is_candidate)
    keep = sum(line.keep for line in lines)
    print(
        f"{name:9} {keep:4} keep {len(lines) - keep:4} skip   "
        f"recall {result.recall:6.1%}   pass rate {result.pass_rate:6.1%}"
    )
    if misses:
        for line in result.missed:
            print(f"    missed  {line.category:16} {line.text}")
        for line in result.passed:
            print(f"    passed  {line.category:16} {line.text}")
    return result.recall, result.pass_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list the lines it gets wrong")
    args = parser.parse_args()
    lines = corpus_lines()
    tuning, held_out = split(lines)
    _report("tuning", tuning, args.misses)
    recall, pass_rate = _report("held-out", held_out, args.misses)
    _report("all", lines, False)
    started = time.perf_counter()
    rounds = 20
    for _ in range(rounds):
        for line in lines:
            is_candidate(line.text)
    per_line_us = (time.perf_counter() - started) / (rounds * len(lines)) * 1e6
    print(f"cost: {per_line_us:.1f} us per line")
    print(f"held-out recall >= {RECALL_TARGET:.0%}: {_verdict(recall >= RECALL_TARGET)}")
    print(f"held-out pass rate <= {PASS_TARGET:.0%}: {_verdict(pass_rate <= PASS_TARGET)}")


def _verdict(met: bool) -> str:
    return "PASS" if met else "MISS"


if __name__ == "__main__":
    main()
