"""Who may use the console: the console token, as a bearer header or a login cookie.

  Authorization: Bearer <token>        scripts and the API; compared in constant time
  POST /pallas/api/login {token}       sets an HttpOnly, SameSite=Strict session cookie
                                       "<issued>.<mac>" signed with the token, valid SESSION
  a state-changing request made with the cookie must carry the session's CSRF value (the
  `X-CSRF-Token` header or a `csrf_token` form field): a page of another site cannot know it
  failed logins and wrong bearer tokens: at most FAILURES_ALLOWED per client address in
  FAILURE_WINDOW, then that address's logins and bearer calls are refused (docs/console.md)

Changing PALLAS_CONSOLE_TOKEN signs every session out. Decisions are pure; time is passed in.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

COOKIE = "pallas_session"
SESSION = timedelta(days=7)
FAILURES_ALLOWED = 5
FAILURE_WINDOW = timedelta(minutes=5)
MAX_CLIENTS = 10_000  # clients whose failures are remembered (a bounded cache)


class Caller(StrEnum):
    """Who a request says it is, by its headers."""

    BEARER = "bearer"  # the console token in an Authorization header
    COOKIE = "cookie"  # a valid session cookie
    WRONG_TOKEN = "wrong_token"  # a bearer token that is not the console's, and no session
    ANONYMOUS = "anonymous"


def caller_of(authorization: str, session: str, token: str, now: datetime) -> Caller:
    """Who is asking: the bearer token first, then the session cookie (the CSRF value is
    checked where a change is made). A wrong bearer token beside a valid session is the
    session's: something else may have added the header."""
    if authorization.lower().startswith("bearer ") and token_matches(
        authorization[7:].strip(), token
    ):
        return Caller.BEARER
    if session and session_valid(session, token, now):
        return Caller.COOKIE
    if authorization.lower().startswith("bearer "):
        return Caller.WRONG_TOKEN
    return Caller.ANONYMOUS


def client_key(host: str) -> str:
    """What the limiter counts failures by: the address, or for IPv6 its /64 (one host
    commonly holds a whole /64, and could otherwise guess from each address in turn)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return host


def token_matches(given: str, token: str) -> bool:
    return bool(token) and hmac.compare_digest(given.encode(), token.encode())


def _mac(token: str, message: str) -> str:
    return hmac.new(token.encode(), message.encode(), hashlib.sha256).hexdigest()


def issue_session(token: str, now: datetime) -> str:
    issued = str(int(now.timestamp()))
    return f"{issued}.{_mac(token, 'session:' + issued)}"


def session_valid(value: str, token: str, now: datetime) -> bool:
    """A cookie this token signed, not older than SESSION (nor from the future)."""
    issued, _, mac = value.partition(".")
    if not issued.isdigit() or not token:
        return False
    if not hmac.compare_digest(mac, _mac(token, "session:" + issued)):
        return False
    age = now.timestamp() - int(issued)
    return age + 60 >= 0 and age <= SESSION.total_seconds()


def csrf_for(session: str, token: str) -> str:
    """The CSRF value of one session: pages embed it, forms send it back."""
    return _mac(token, "csrf:" + session)


def csrf_valid(given: str, session: str, token: str) -> bool:
    return bool(given) and hmac.compare_digest(given, csrf_for(session, token))


@dataclass
class LoginLimiter:
    """Failed logins per client; refused while too many are recent."""

    allowed: int = FAILURES_ALLOWED
    window: timedelta = FAILURE_WINDOW

    def __post_init__(self) -> None:
        self._failures: dict[str, deque[datetime]] = {}

    def blocked(self, client: str, now: datetime) -> bool:
        if client not in self._failures:  # asking remembers no one
            return False
        return len(self._recent(client, now)) >= self.allowed

    def failed(self, client: str, now: datetime) -> None:
        if client not in self._failures and len(self._failures) >= MAX_CLIENTS:
            self._failures.pop(next(iter(self._failures)))  # the oldest client goes
        self._recent(client, now).append(now)

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)

    def _recent(self, client: str, now: datetime) -> deque[datetime]:
        failures = self._failures.setdefault(client, deque())
        while failures and now - failures[0] > self.window:
            failures.popleft()
        return failures
