from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pallas.console.auth import (
    FAILURE_WINDOW,
    Caller,
    LoginLimiter,
    caller_of,
    client_key,
    issue_session,
)

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


TOKEN = "auth-test-token"


def test_the_caller_by_bearer_token_or_session() -> None:
    session = issue_session(TOKEN, NOW)
    assert caller_of(f"Bearer {TOKEN}", "", TOKEN, NOW) is Caller.BEARER
    assert caller_of("", session, TOKEN, NOW) is Caller.COOKIE
    assert caller_of("Bearer guess", "", TOKEN, NOW) is Caller.WRONG_TOKEN
    assert caller_of("", "", TOKEN, NOW) is Caller.ANONYMOUS
    assert caller_of(TOKEN, "", TOKEN, NOW) is Caller.ANONYMOUS  # not a bearer header
    assert caller_of("", "1700000000.deadbeef", TOKEN, NOW) is Caller.ANONYMOUS


def test_a_wrong_bearer_token_beside_a_valid_session_is_the_sessions() -> None:
    session = issue_session(TOKEN, NOW)
    assert caller_of("Bearer added-by-a-proxy", session, TOKEN, NOW) is Caller.COOKIE


def test_failures_are_counted_per_ipv4_address_and_per_ipv6_64() -> None:
    assert client_key("192.0.2.7") == "192.0.2.7"
    assert (
        client_key("2001:db8:1:2::5") == client_key("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    )
    assert client_key("2001:db8:1:3::5") != client_key("2001:db8:1:2::5")
    assert client_key("unknown") == "unknown"
