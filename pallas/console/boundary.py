"""The HTTP boundary: an ASGI middleware in front of every route (docs/security.md).

Before any route runs, and before a byte of the body is read:
  - who is asking is settled from the headers alone (the console token as a bearer header,
    or a valid session cookie), so a state change on a guarded route without credentials is
    refused at once, its body unread; a wrong bearer token counts as a failed sign-in of its
    address, and an address past its failures is refused (429) with any bearer token;
  - the body is counted as it streams in and refused with 413 the moment it passes the
    limit (PUBLIC_BODY_BYTES before authentication, SIGNED_IN_BODY_BYTES after), and with
    408 if it has not all arrived within BODY_TIMEOUT_S;
  - an error no route handled becomes a plain 500 whose body names nothing of the code,
    and the connection stays usable.
Every response carries the security headers below. WebSocket traffic passes untouched
(uvicorn bounds its frames).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from loguru import logger
from starlette.requests import cookie_parser

from pallas.console.auth import COOKIE, Caller, caller_of, client_key
from pallas.console.guard import Door

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC_BODY_BYTES = 16 * 1024  # a login form, or anything sent without credentials
SIGNED_IN_BODY_BYTES = 1024 * 1024  # a settings form, a sandbox line; NoneBot's own routes
BODY_TIMEOUT_S = 30.0  # from the first read of a body to its last byte

CONSOLE_PREFIX = "/pallas/"
# Console routes anyone may call: the health report, signing in and out, the stylesheet.
PUBLIC_ROUTES = frozenset({"/pallas/api/health", "/pallas/api/login", "/pallas/api/logout",
                           "/pallas/login"})  # fmt: skip
PUBLIC_PREFIXES = ("/pallas/static/",)
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)


class Refusal(StrEnum):
    """Why the boundary answered instead of the route."""

    SIGN_IN_FIRST = "sign_in_first"  # a guarded state change without credentials
    WRONG_TOKEN = "wrong_token"  # counted like a failed sign-in
    BLOCKED = "blocked"  # too many failed attempts from this address
    TOO_LARGE = "too_large"
    TOO_SLOW = "too_slow"
    FAILED = "failed"  # the route raised


@dataclass(frozen=True)
class Answer:
    status: int
    detail: str = ""
    location: str = ""  # a redirect instead of a body


def is_console(path: str) -> bool:
    return path.startswith(CONSOLE_PREFIX) or path == CONSOLE_PREFIX.rstrip("/")


def is_guarded(path: str) -> bool:
    """A console route that needs the token (every one but the public few)."""
    return is_console(path) and path not in PUBLIC_ROUTES and not path.startswith(PUBLIC_PREFIXES)


@dataclass(frozen=True)
class BodyLimits:
    public_bytes: int = PUBLIC_BODY_BYTES
    signed_in_bytes: int = SIGNED_IN_BODY_BYTES
    timeout_s: float = BODY_TIMEOUT_S


def body_limit(path: str, signed_in: bool, limits: BodyLimits) -> int:
    """How many body bytes a request may send (pure)."""
    if is_console(path) and not signed_in:
        return limits.public_bytes
    return limits.signed_in_bytes


def refusal_before_body(path: str, method: str, caller: Caller, blocked: bool) -> Refusal | None:
    """Whether to refuse from the head alone, as the route's own guard would (pure).
    `blocked`: the caller's address has used up its failed attempts (auth.LoginLimiter)."""
    if not is_guarded(path):
        return None
    if blocked and caller in (Caller.BEARER, Caller.WRONG_TOKEN):
        return Refusal.BLOCKED  # even the right token waits: guessing must buy nothing
    if caller is Caller.WRONG_TOKEN:
        return Refusal.WRONG_TOKEN
    if method in WRITE_METHODS and caller is Caller.ANONYMOUS:
        return Refusal.SIGN_IN_FIRST
    return None


def answer_for(refusal: Refusal, path: str) -> Answer:
    """The response for a refusal: what the route's guard answers (401 for the API and the
    sandbox's calls, the login page for pages), else the limit's own status (pure)."""
    if refusal in (Refusal.SIGN_IN_FIRST, Refusal.WRONG_TOKEN):
        if path.startswith(("/pallas/api/", "/pallas/sandbox/")):
            return Answer(401, "需要登录：请提供控制台令牌")
        return Answer(303, location="/pallas/login")
    if refusal is Refusal.BLOCKED:
        return Answer(429, "登录失败次数太多，请稍后再试")
    if refusal is Refusal.TOO_LARGE:
        return Answer(413, "请求太大了")
    if refusal is Refusal.TOO_SLOW:
        return Answer(408, "请求发得太慢，已断开")
    return Answer(500, "出错了，详情在机器人的日志里")


def declared_length(headers: dict[bytes, bytes]) -> int | None:
    value = headers.get(b"content-length", b"").strip()
    return int(value) if value.isdigit() and len(value) <= 18 else None


def _caller(headers: dict[bytes, bytes], door: Door) -> Caller:
    cookies = cookie_parser(headers.get(b"cookie", b"").decode("latin-1"))
    authorization = headers.get(b"authorization", b"").decode("latin-1")
    return caller_of(authorization, cookies.get(COOKIE, ""), door.token, door.clock())


@dataclass
class _Exchange:
    """One request's passage through the boundary."""

    limit: int
    timeout_s: float
    extra_headers: list[tuple[bytes, bytes]]
    received: int = 0
    started: bool = False  # the response has begun
    body_done: bool = False
    refused: Refusal | None = None
    deadline: float | None = None


class Boundary:
    """The ASGI middleware; NoneBot's FastAPI app carries it (packages/console)."""

    def __init__(self, app: ASGIApp, door: Door, limits: BodyLimits | None = None) -> None:
        self.app = app
        self.door = door
        self.limits = limits or BodyLimits()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        headers = dict(scope["headers"])
        caller = _caller(headers, self.door)
        signed_in = caller in (Caller.BEARER, Caller.COOKIE)
        exchange = _Exchange(
            body_limit(path, signed_in, self.limits), self.limits.timeout_s, _headers_for(path)
        )
        first = self._refusal(scope, caller)
        length = declared_length(headers)
        if first is None and length is not None and length > exchange.limit:
            first = Refusal.TOO_LARGE
        if first is not None:
            await _answer(send, exchange, answer_for(first, path))
            return
        await self._pass(scope, _Gate(exchange, receive, send, path))

    def _refusal(self, scope: Scope, caller: Caller) -> Refusal | None:
        """The head's refusal, if any; a wrong token counts as a failed sign-in of the
        address it came from (the socket's, or a trusted proxy's client)."""
        client = client_key(scope["client"][0]) if scope.get("client") else "unknown"
        now, limiter = self.door.clock(), self.door.limiter
        by_token = caller in (Caller.BEARER, Caller.WRONG_TOKEN)
        blocked = by_token and is_guarded(scope["path"]) and limiter.blocked(client, now)
        refusal = refusal_before_body(scope["path"], scope["method"], caller, blocked)
        if refusal is Refusal.WRONG_TOKEN:
            limiter.failed(client, now)
        return refusal

    async def _pass(self, scope: Scope, gate: _Gate) -> None:
        try:
            await self.app(scope, gate.receive, gate.send)
        except Exception as exc:
            if gate.exchange.refused is not None:
                return  # the route failed on the body the boundary cut off; answered already
            if gate.exchange.started:
                raise
            logger.opt(exception=exc).error("http: {} {} failed", scope["method"], gate.path)
            await gate.refuse(Refusal.FAILED)


@dataclass
class _Gate:
    """The receive and send the route sees: counted, timed, and silenced after a refusal."""

    exchange: _Exchange
    upstream_receive: Receive
    upstream_send: Send
    path: str

    async def receive(self) -> Message:
        exchange = self.exchange
        if exchange.refused is not None:
            return {"type": "http.disconnect"}
        if exchange.body_done:
            return await self.upstream_receive()  # e.g. a stream waiting for the disconnect
        loop = asyncio.get_running_loop()
        if exchange.deadline is None:
            exchange.deadline = loop.time() + exchange.timeout_s
        try:
            async with asyncio.timeout_at(exchange.deadline):
                message = await self.upstream_receive()
        except TimeoutError:
            return await self.refuse(Refusal.TOO_SLOW)
        if message["type"] == "http.request":
            exchange.received += len(message.get("body", b""))
            exchange.body_done = not message.get("more_body", False)
            if exchange.received > exchange.limit:
                return await self.refuse(Refusal.TOO_LARGE)
        return message

    async def send(self, message: Message) -> None:
        exchange = self.exchange
        if exchange.refused is not None:
            return  # the boundary has answered; the route's late answer goes nowhere
        if message["type"] == "http.response.start":
            exchange.started = True
            added = _missing(message, exchange.extra_headers)
            message = {**message, "headers": [*message.get("headers", []), *added]}
        await self.upstream_send(message)

    async def refuse(self, refusal: Refusal) -> Message:
        exchange = self.exchange
        exchange.refused = refusal
        if not exchange.started:
            await _answer(self.upstream_send, exchange, answer_for(refusal, self.path))
        return {"type": "http.disconnect"}


def _headers_for(path: str) -> list[tuple[bytes, bytes]]:
    headers = list(SECURITY_HEADERS)
    if is_guarded(path):
        headers.append((b"cache-control", b"no-store"))  # what the console shows stays put
    return headers


def _missing(message: Message, extra: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    present = {name.lower() for name, _ in message.get("headers", [])}
    return [(name, value) for name, value in extra if name not in present]


async def _answer(send: Send, exchange: _Exchange, answer: Answer) -> None:
    exchange.started = True
    headers = [*exchange.extra_headers]
    if answer.status == 408:
        headers.append((b"connection", b"close"))  # a client this slow is not waited for
    if answer.location:
        headers.append((b"location", answer.location.encode()))
        body = b""
    else:
        body = json.dumps({"detail": answer.detail}, ensure_ascii=False).encode()
        headers.append((b"content-type", b"application/json"))
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
