"""The sequence of attempts for one call: candidates in order, resting models skipped, and
one short wait when every model asked for a moment.

A plain generator drives it, so the attempts themselves are awaited in the caller's frame.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pallas.providers.catalog import BreakerPolicy, ModelSpec
from pallas.providers.errors import (
    AllCandidatesFailedError,
    AttemptFailure,
    FailureKind,
    ModelRejectedError,
)
from pallas.providers.selection import CircuitBreaker


@dataclass(frozen=True)
class Try:
    spec: ModelSpec
    number: int  # 1 for the first attempt of the call


@dataclass(frozen=True)
class Pause:
    seconds: float


class FailoverPlan:
    def __init__(
        self,
        candidates: list[ModelSpec],
        breaker: CircuitBreaker,
        policy: BreakerPolicy,
        monotonic: Callable[[], float],
    ) -> None:
        self._candidates = candidates
        self._breaker = breaker
        self._policy = policy
        self._monotonic = monotonic
        self._failures: list[AttemptFailure] = []
        self._number = 0

    def steps(self) -> Iterator[Try | Pause]:
        yield from self._round(self._candidates)
        retry = self._worth_waiting_for()
        if retry:
            now = self._monotonic()
            yield Pause(min(self._breaker.reopens_in(spec.name, now) for spec in retry))
            yield from self._round(retry)

    def failed(self, failure: AttemptFailure, provider: str) -> None:
        """Note a failed attempt; a rejected request ends the call at once."""
        self._failures.append(failure)
        if not failure.kind.fails_over:
            raise ModelRejectedError(failure, provider)

    def exhausted(self) -> AllCandidatesFailedError:
        return AllCandidatesFailedError(tuple(self._failures))

    def _round(self, candidates: list[ModelSpec]) -> Iterator[Try]:
        for spec in candidates:
            now = self._monotonic()
            if self._breaker.is_open(spec.name, now):
                rest = self._breaker.reopens_in(spec.name, now)
                self._failures.append(
                    AttemptFailure(spec.name, FailureKind.CIRCUIT_OPEN, f"resting {rest:.1f} s")
                )
                continue
            self._number += 1
            yield Try(spec, self._number)

    def _worth_waiting_for(self) -> list[ModelSpec]:
        short = {
            f.model
            for f in self._failures
            if f.kind is FailureKind.RATE_LIMITED
            and f.retry_after_s is not None
            and f.retry_after_s <= self._policy.max_wait_s
        }
        return [spec for spec in self._candidates if spec.name in short]
