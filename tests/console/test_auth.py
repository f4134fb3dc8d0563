from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pallas.console.auth import FAILURE_WINDOW, LoginLimiter

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_an_address_is_blocked_after_its_failures_until_the_window_passes() -> None:
    limiter = LoginLimiter(allowed=3)
    for n in range(3):
        assert not limiter.blocked("10.0.0.1", NOW)
        limiter.failed("10.0.0.1", NOW + timedelta(seconds=n))
    assert limiter.blocked("10.0.0.1", NOW + timedelta(seconds=3))
    assert not limiter.blocked("10.0.0.2", NOW)  # another address is not touched
    later = NOW + FAILURE_WINDOW + timedelta(seconds=3)
    assert not limiter.blocked("10.0.0.1", later)


def test_a_success_forgets_the_failures() -> None:
    limiter = LoginLimiter(allowed=2)
    limiter.failed("a", NOW)
    limiter.succeeded("a")
    limiter.failed("a", NOW)
    assert not limiter.blocked("a", NOW)


def test_asking_about_an_address_remembers_nothing() -> None:
    limiter = LoginLimiter()
    for n in range(1000):
        limiter.blocked(f"10.0.{n // 256}.{n % 256}", NOW)
    assert limiter._failures == {}
