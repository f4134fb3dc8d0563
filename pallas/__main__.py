"""`python -m pallas doctor`: check the set-up and say what to fix (docs/console.md)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from loguru import logger

from pallas.console.doctor import examine, report
from pallas.features import BUILT_IN_FEATURES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pallas")
    commands = parser.add_subparsers(dest="command", required=True)
    doctor = commands.add_parser("doctor", help="check .env, models, the database and NapCat")
    doctor.add_argument("--env-file", default=".env", help="the .env file to read")
    args = parser.parse_args(argv)
    logger.remove()  # the findings say what matters; the model layer's log lines are noise here
    return report(asyncio.run(examine(args.env_file, BUILT_IN_FEATURES)))


if __name__ == "__main__":
    sys.exit(main())
