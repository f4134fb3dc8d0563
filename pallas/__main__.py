"""`python -m pallas doctor`: check the set-up and say what to fix (docs/console.md).
`python -m pallas replay`: a recorded window under current or proposed settings (docs/cost.md).
`python -m pallas export FILE` / `import FILE`: the whole store and data folder as one archive,
and back into an empty store (docs/deploy.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

from loguru import logger

from pallas.config import ConfigError, load_settings
from pallas.console.archive import archive_command
from pallas.console.doctor import MODEL_TIMEOUT_S, as_json, examine, summary
from pallas.console.replay import parse_changes, replay_group, window_of
from pallas.features import BUILT_IN_FEATURES
from pallas.product.replay.render import as_json as replay_json
from pallas.product.replay.render import render
from pallas.product.replay.run import ReplayError
from pallas.store.archive import ArchiveError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pallas")
    commands = parser.add_subparsers(dest="command", required=True)
    doctor = commands.add_parser("doctor", help="check .env, models, the database and NapCat")
    doctor.add_argument("--env-file", default=".env", help="the .env file to read")
    doctor.add_argument("--json", action="store_true", help="one JSON document, for scripts")
    doctor.add_argument("--timeout", type=float, default=MODEL_TIMEOUT_S,
                        help="seconds each model's check may take")  # fmt: skip
    _replay_parser(commands)
    _archive_parsers(commands)
    args = parser.parse_args(argv)
    logger.remove()  # the findings say what matters; the model layer's log lines are noise here
    if args.command == "replay":
        return _replay(args)
    if args.command in ("export", "import"):
        return _archive(args)
    if args.json:
        findings = asyncio.run(examine(args.env_file, BUILT_IN_FEATURES, timeout_s=args.timeout))
        print(json.dumps(as_json(findings), ensure_ascii=False, indent=1))
        return 0 if all(f.ok for f in findings) else 1
    progress = partial(print, flush=True)  # each line as it is found: a slow check shows
    found = examine(args.env_file, BUILT_IN_FEATURES, progress, args.timeout)
    return summary(asyncio.run(found))


def _replay_parser(commands: Any) -> None:
    replay = commands.add_parser(
        "replay", help="a chat's recorded day under the settings then or proposed ones"
    )
    replay.add_argument("--group", required=True, help="the QQ group number")
    replay.add_argument("--account", help="the bot's QQ number, when several are in the group")
    replay.add_argument("--day", help="a day in Beijing time, e.g. 2026-12-05")
    replay.add_argument("--since", help="the window's start (ISO 8601 with offset)")
    replay.add_argument("--until", help="the window's end (ISO 8601 with offset)")
    replay.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a proposed gate setting (repeatable)")  # fmt: skip
    replay.add_argument("--env-file", default=".env", help="the .env file to read")
    replay.add_argument("--json", action="store_true", help="one JSON document, for scripts")


def _replay(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args.env_file)
        window = window_of(args.day, args.since, args.until)
        proposed = parse_changes(args.set)
        report = asyncio.run(replay_group(settings, args.group, args.account, window, proposed))
    except (ReplayError, ConfigError) as exc:
        print(f"重放不了：{exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(replay_json(report), ensure_ascii=False, indent=1, default=str))
    else:
        print(render(report))
    return 0


def _archive_parsers(commands: Any) -> None:
    export = commands.add_parser("export", help="the whole store and data folder, one archive")
    export.add_argument("file", help="the archive to write (e.g. pallas-2026-12-06.tar.gz)")
    export.add_argument("--env-file", default=".env", help="the .env file to read")
    restore = commands.add_parser("import", help="an archive into an empty store")
    restore.add_argument("file", help="the archive to read")
    restore.add_argument("--account", action="append", default=[], metavar="OLD=NEW",
                         help="the bot's QQ number changed: store NEW where OLD was")  # fmt: skip
    restore.add_argument("--env-file", default=".env", help="the .env file to read")


def _archive(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args.env_file)
        mapping = dict(_account_pair(pair) for pair in getattr(args, "account", ()))
        run = archive_command(settings, args.command, Path(args.file), mapping)
        print(asyncio.run(run))
    except (ArchiveError, ConfigError) as exc:
        print(f"pallas {args.command}: {exc}", file=sys.stderr)
        return 2
    return 0


def _account_pair(pair: str) -> tuple[str, str]:
    old, sep, new = pair.partition("=")
    if not (sep and old.strip().isdigit() and new.strip().isdigit()):
        raise ArchiveError(f"--account wants OLD=NEW (two QQ numbers), not {pair!r}")
    return old.strip(), new.strip()


if __name__ == "__main__":
    sys.exit(main())
