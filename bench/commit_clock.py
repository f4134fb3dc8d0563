"""Bench only: the moment each inbound message's row was committed, inside the real bot.

`run_pallas.py` stamps every new message row here when the timeline writer's transaction
that inserted it returns (committed); the probe plugin reads the stamp back for its ack. In
the bare NoneBot nothing stamps and every lookup is None. Stamps are `time.monotonic()`:
CLOCK_MONOTONIC is system-wide on Linux, so the harness, another process, can subtract its
own send time (also `time.monotonic()`). No imports from `pallas`: the bare NoneBot loads this
too and should stay bare.
"""

from __future__ import annotations

from collections.abc import Iterable

_committed: dict[str, float] = {}  # platform message id -> monotonic time of its commit


def stamp(platform_message_ids: Iterable[str], now: float) -> None:
    for platform_message_id in platform_message_ids:
        _committed[platform_message_id] = now


def committed_at(platform_message_id: str) -> float | None:
    """When the message's row was committed (and forget it), or None if never stamped."""
    return _committed.pop(platform_message_id, None)
