"""`python -m pallas doctor`: check the set-up and say what to fix (docs/console.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from functools import partial

from loguru import logger

from pallas.console.doctor import MODEL_TIMEOUT_S, as_json, examine, summary
from pallas.features import BUILT_IN_FEATURES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pallas")
    commands = parser.add_subparsers(dest="command", required=True)
    doctor = commands.add_parser("doctor", help="check .env, models, the database and NapCat")
    doctor.add_argument("--env-file", default=".env", help="the .env file to read")
    doctor.add_argument("--json", action="store_true", help="one JSON document, for scripts")
    doctor.add_argument("--timeout", type=float, default=MODEL_TIMEOUT_S,
                        help="seconds each model's check may take")  # fmt: skip
    args = parser.parse_args(argv)
    logger.remove()  # the findings say what matters; the model layer's log lines are noise here
    if args.json:
        findings = asyncio.run(examine(args.env_file, BUILT_IN_FEATURES, timeout_s=args.timeout))
        print(json.dumps(as_json(findings), ensure_ascii=False, indent=1))
        return 0 if all(f.ok for f in findings) else 1
    progress = partial(print, flush=True)  # each line as it is found: a slow check shows
    found = examine(args.env_file, BUILT_IN_FEATURES, progress, args.timeout)
    return summary(asyncio.run(found))


if __name__ == "__main__":
    sys.exit(main())
