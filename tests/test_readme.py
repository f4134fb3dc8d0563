"""The README's quick start is the contract: two commands, and CI runs the second verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_quick_start_is_two_commands_and_ci_runs_the_test_one() -> None:
    start, test = quick_start_commands()
    assert start.endswith("python bot.py")
    assert test.endswith("python -m pytest")
    assert test in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
