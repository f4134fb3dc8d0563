"""The mutation score per module, from the results of the last `mutmut run`.

Run it from the repository root after `mutmut run`:

    python -m tests.support.mutation_score

It reads `mutmut results --all true` (one line per mutant: name and status) and prints, per
mutated module, how many mutants were killed (a test failed, or the mutant hung past its
timeout), how many survived, and the score killed / (killed + survived). Mutants no test
reaches count as survivors. With `--survivors` it lists each survivor's name, for
`mutmut show NAME`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass

KILLED = {"killed", "timeout"}
SURVIVED = {"survived", "no tests"}
MUTANT_MARK = "__mutmut_"


@dataclass(frozen=True)
class Mutant:
    name: str
    status: str

    @property
    def module(self) -> str:
        """`pallas.store.outbox.xǁOutboxStoreǁmark__mutmut_3` -> `pallas.store.outbox`."""
        dotted = self.name.split(MUTANT_MARK)[0]
        return ".".join(part for part in dotted.split(".") if not part.startswith("x"))


def parse_results(text: str) -> list[Mutant]:
    mutants = []
    for line in text.splitlines():
        name, sep, status = line.strip().partition(": ")
        if sep and MUTANT_MARK in name:
            mutants.append(Mutant(name, status.strip()))
    return mutants


def score_table(mutants: list[Mutant]) -> list[str]:
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    for mutant in mutants:
        by_module[mutant.module][mutant.status] += 1
    lines = [f"{'module':<48} {'killed':>7} {'survived':>9} {'other':>6} {'score':>7}"]
    totals: Counter[str] = Counter()
    for module in sorted(by_module):
        counts = by_module[module]
        totals.update(counts)
        lines.append(_row(module, counts))
    lines.append(_row("all", totals))
    return lines


def _row(label: str, counts: Counter[str]) -> str:
    killed = sum(counts[s] for s in KILLED)
    survived = sum(counts[s] for s in SURVIVED)
    other = sum(counts.values()) - killed - survived
    judged = killed + survived
    score = f"{killed / judged:.1%}" if judged else "-"
    return f"{label:<48} {killed:>7} {survived:>9} {other:>6} {score:>7}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--survivors", action="store_true", help="list each surviving mutant")
    args = parser.parse_args()
    done = subprocess.run(
        ["mutmut", "results", "--all", "true"], capture_output=True, text=True, check=False
    )
    mutants = parse_results(done.stdout)
    if not mutants:
        print("no mutmut results here: run `mutmut run` first", file=sys.stderr)
        return 1
    print("\n".join(score_table(mutants)))
    if args.survivors:
        for mutant in mutants:
            if mutant.status in SURVIVED:
                print(f"{mutant.status:<9} {mutant.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
