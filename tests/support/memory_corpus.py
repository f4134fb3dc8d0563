"""The labelled corpus of group-chat lines (tests/fixtures/memory_lines.tsv) the memory's
candidate filter is measured on, and its fixed split into a tuning half and a held-out half."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).parent.parent / "fixtures" / "memory_lines.tsv"
SEED = 33  # fixed: the held-out half is the same in every run


@dataclass(frozen=True)
class Line:
    keep: bool  # worth remembering a week later
    category: str
    text: str


@dataclass(frozen=True)
class Score:
    recall: float  # of the lines worth remembering, the share let through
    pass_rate: float  # of the rest, the share let through
    missed: tuple[Line, ...]
    passed: tuple[Line, ...]


def corpus_lines(path: Path = CORPUS) -> list[Line]:
    lines = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        label, category, text = raw.split("\t")
        if label not in ("keep", "skip"):
            raise ValueError(f"{path}: unknown label {label!r}")
        lines.append(Line(label == "keep", category, text))
    return lines


def split(lines: Sequence[Line], seed: int = SEED) -> tuple[list[Line], list[Line]]:
    """(tuning, held_out): each label shuffled with `seed` and halved, so both halves hold
    the same mix."""
    tuning: list[Line] = []
    held_out: list[Line] = []
    for keep in (True, False):
        group = [line for line in lines if line.keep is keep]
        random.Random(seed).shuffle(group)
        tuning += group[: len(group) // 2]
        held_out += group[len(group) // 2 :]
    return tuning, held_out


def score(lines: Sequence[Line], passes: Callable[[str], bool]) -> Score:
    keep = [line for line in lines if line.keep]
    rest = [line for line in lines if not line.keep]
    missed = tuple(line for line in keep if not passes(line.text))
    passed = tuple(line for line in rest if passes(line.text))
    return Score(
        recall=1 - len(missed) / len(keep),
        pass_rate=len(passed) / len(rest),
        missed=missed,
        passed=passed,
    )
