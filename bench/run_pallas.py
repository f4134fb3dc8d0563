"""The real bot, started as bot.py starts it, plus the bench probe plugin."""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import nonebot  # noqa: E402

from bot import init_bot  # noqa: E402
from pallas.config import ConfigError, load_settings  # noqa: E402


def main() -> None:
    try:
        settings = load_settings(env_file=None)
    except ConfigError as exc:
        print(f"pallas: cannot start, {exc}", file=sys.stderr)
        sys.exit(2)
    init_bot(settings, extra_plugins=("bench.probe",))
    nonebot.run()


if __name__ == "__main__":
    main()
