"""Pure timing decisions of the job worker: backoff between attempts, how long to idle."""

from __future__ import annotations

from datetime import datetime

MAX_DOUBLINGS = 64  # beyond this every sane cap is reached; keeps 2**n a small float


def backoff_delay(attempts: int, base_s: float, cap_s: float) -> float:
    """Seconds before the next attempt after the `attempts`-th failure: base, 2×base, 4×base
    ... at most `cap_s`."""
    if base_s < 0 or cap_s < 0:
        raise ValueError(f"backoff base and cap must be >= 0, got {base_s} and {cap_s}")
    doublings = min(max(0, attempts - 1), MAX_DOUBLINGS)
    return min(cap_s, base_s * 2.0**doublings)


def retry_delay(attempts: int, max_attempts: int, base_s: float, cap_s: float) -> float | None:
    """After a failed attempt: the backoff before the next one, or None when none is left."""
    if attempts >= max_attempts:
        return None
    return backoff_delay(attempts, base_s, cap_s)


# Work already due that a claim left behind (its slots went to expired jobs it failed, a row
# locked by another claimer): look again this soon, not after the idle wait.
DUE_RETRY_S = 1.0


def idle_wait(now: datetime, next_due: datetime | None, idle_s: float) -> float:
    """Seconds to sleep when a claim found nothing more: until the next due time, at most
    `idle_s`. A due time already reached waits `DUE_RETRY_S` (at most `idle_s`), so a clock
    that stands still cannot make the loop spin, and due work is not left for `idle_s`."""
    if next_due is None:
        return idle_s
    until = (next_due - now).total_seconds()
    return min(idle_s, until) if until > 0 else min(idle_s, DUE_RETRY_S)
