"""The worker's pure timing: backoff between attempts and how long to idle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pallas.product.conversation.jobs.retry import backoff_delay, idle_wait, retry_delay

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("attempts", "delay"),
    [(0, 5.0), (1, 5.0), (2, 10.0), (3, 20.0), (4, 40.0), (7, 320.0), (8, 600.0), (10_000, 600.0)],
)
def test_backoff_doubles_from_the_base_up_to_the_cap(attempts: int, delay: float) -> None:
    assert backoff_delay(attempts, 5.0, 600.0) == delay


def test_a_zero_base_retries_at_once_and_a_negative_one_is_refused() -> None:
    assert backoff_delay(9, 0.0, 600.0) == 0.0
    with pytest.raises(ValueError, match=">= 0"):
        backoff_delay(1, -1.0, 600.0)


@pytest.mark.parametrize(
    ("attempts", "max_attempts", "delay"),
    [(1, 5, 5.0), (4, 5, 40.0), (5, 5, None), (6, 5, None), (1, 1, None)],
)
def test_retry_delay_gives_up_when_the_attempts_are_spent(
    attempts: int, max_attempts: int, delay: float | None
) -> None:
    assert retry_delay(attempts, max_attempts, 5.0, 600.0) == delay


@pytest.mark.parametrize(
    ("next_due", "wait"),
    [
        pytest.param(None, 30.0, id="nothing queued: the idle look"),
        pytest.param(T0 + timedelta(seconds=0.25), 0.25, id="due soon"),
        pytest.param(T0 + timedelta(minutes=5), 30.0, id="due later: look again anyway"),
        pytest.param(T0, 1.0, id="due now yet not claimed: soon, no spin"),
    ],
)
def test_idle_wait(next_due: datetime | None, wait: float) -> None:
    assert idle_wait(T0, next_due, 30.0) == wait
