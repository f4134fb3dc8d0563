"""The real bot, started as bot.py starts it, plus the bench probe plugin.

One bench-only addition, made from here and not in `pallas/`: the timeline writer's
group-commit transaction is wrapped so that each new message row is stamped with the moment
its transaction returned, i.e. committed (`bench.commit_clock`); the probe sends the stamp
back with its ack. The transaction, not `TimelineWriter.write`: `write` returns when the
caller's task resumes, and the tasks of one batch resume one after another, each running the
gate until its next await, which would charge later messages of a batch with earlier ones' work.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


from bench import commit_clock  # noqa: E402
from bot import init_bot, serve  # noqa: E402
from pallas.app import Runtime  # noqa: E402
from pallas.config import ConfigError, load_settings  # noqa: E402
from pallas.core.inbound import InboundEvent, InboundMessage  # noqa: E402
from pallas.store.timeline import MessageWritten, WriteOutcome  # noqa: E402

Apply = Callable[[Sequence[InboundEvent]], Awaitable[list[WriteOutcome]]]


def stamp_commits(runtime: Runtime) -> None:
    """Wrap the timeline committer's per-batch transaction (private; bench only)."""
    committer = runtime.recorders.timeline._committer
    committer._apply = _stamping(committer._apply)


def _stamping(inner: Apply) -> Apply:
    async def apply(items: Sequence[InboundEvent]) -> list[WriteOutcome]:
        outcomes = await inner(items)  # returns once the transaction has committed
        now = time.monotonic()
        commit_clock.stamp(
            (
                item.platform_message_id
                for item, outcome in zip(items, outcomes, strict=True)
                if isinstance(item, InboundMessage)
                and isinstance(outcome, MessageWritten)
                and not outcome.duplicate
            ),
            now,
        )
        return outcomes

    return apply


def main() -> None:
    try:
        settings = load_settings(env_file=None)
    except ConfigError as exc:
        print(f"pallas: cannot start, {exc}", file=sys.stderr)
        sys.exit(2)
    stamp_commits(init_bot(settings, extra_plugins=("bench.probe",)))
    serve(settings)


if __name__ == "__main__":
    main()
