"""The process's wall clock: UTC now, moved by `PALLAS_CLOCK_SHIFT_S` for drills.

A shift lets an owner (or a test) see what a schedule does tomorrow without waiting for it:
a daily digest, a daily reminder. It is set once at start-up, before anything reads the
clock, and moves everything that reads it together (jobs, turns, the timeline's stamps).
Time the model service or NapCat report is theirs and is not moved.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_shift = timedelta(0)


def utc_now() -> datetime:
    return datetime.now(UTC) + _shift


def shift_clock(seconds: float) -> None:
    """Move the clock by `seconds` from now on (start-up only; 0 is the real time)."""
    global _shift
    _shift = timedelta(seconds=seconds)
