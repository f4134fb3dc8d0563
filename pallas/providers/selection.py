"""Which model to try first, and which models are resting after failures.

`order_candidates` is a pure decision; the breaker is in-memory state (a cool-down of
seconds does not need to survive a restart) with the clock passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from random import Random

from pallas.providers.catalog import BreakerPolicy


def order_candidates(
    names: Sequence[str], *, preferred: str | None, deterministic: bool, rng: Random
) -> list[str]:
    """The preferred model first; then registration order (deterministic types) or a shuffle."""
    rest = [name for name in names if name != preferred]
    if not deterministic:
        rng.shuffle(rest)
    return [preferred, *rest] if preferred in names else rest


@dataclass
class _Health:
    consecutive_failures: int = 0
    open_until: float = 0.0


class CircuitBreaker:
    def __init__(self, policy: BreakerPolicy) -> None:
        self._policy = policy
        self._health: dict[str, _Health] = {}

    def is_open(self, model: str, now: float) -> bool:
        health = self._health.get(model)
        return health is not None and now < health.open_until

    def reopens_in(self, model: str, now: float) -> float:
        health = self._health.get(model)
        return 0.0 if health is None else max(0.0, health.open_until - now)

    def succeeded(self, model: str) -> None:
        self._health.pop(model, None)

    def failed(self, model: str, now: float, retry_after_s: float | None = None) -> None:
        health = self._health.setdefault(model, _Health())
        health.consecutive_failures += 1
        if retry_after_s is not None:
            # The service said when to come back: rest exactly that long (bounded).
            rest = min(retry_after_s, self._policy.max_retry_after_s)
            health.open_until = max(health.open_until, now + rest)
        if health.consecutive_failures >= self._policy.failures_to_open:
            health.open_until = max(health.open_until, now + self._policy.cooldown_s)
