"""The console's door: the FastAPI dependency every route but health uses, and the login and
logout routes (auth.py holds the rules)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from fastapi import APIRouter, HTTPException, Request, Response
from pydantic import BaseModel, Field

from pallas.console.auth import (
    COOKIE,
    SESSION,
    Caller,
    LoginLimiter,
    caller_of,
    client_key,
    csrf_for,
    csrf_valid,
    issue_session,
    token_matches,
)

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CSRF_HEADER = "x-csrf-token"


@dataclass
class Door:
    # The token in effect, read on every request (it is settled at start-up, after the
    # routes are mounted).
    token_of: Callable[[], str]
    clock: Callable[[], datetime]
    limiter: LoginLimiter = field(default_factory=LoginLimiter)

    @property
    def token(self) -> str:
        return self.token_of()


@dataclass(frozen=True)
class Visitor:
    """Who is calling: a bearer script, or a signed-in browser with its CSRF value."""

    by_cookie: bool
    csrf: str = ""


def client_of(request: Request) -> str:
    """The address failures are counted by (the socket's, or a trusted proxy's client)."""
    return client_key(request.client.host) if request.client else "unknown"


def visitor(request: Request, door: Door, form_csrf: str = "") -> Visitor:
    """The caller, or 401 (no or wrong credentials) / 403 (a cookie without its CSRF value)."""
    session = request.cookies.get(COOKIE, "")
    caller = caller_of(request.headers.get("authorization", ""), session, door.token, door.clock())
    if caller is Caller.BEARER:
        return Visitor(by_cookie=False)
    if caller is not Caller.COOKIE:
        raise HTTPException(401, "需要登录：请提供控制台令牌")
    csrf = csrf_for(session, door.token)
    if request.method not in SAFE_METHODS:
        given = request.headers.get(CSRF_HEADER, "") or form_csrf
        if not csrf_valid(given, session, door.token):
            raise HTTPException(403, "请求缺少有效的 CSRF 令牌")
    return Visitor(by_cookie=True, csrf=csrf)


class Login(BaseModel):
    token: str = Field(max_length=512)


class LoggedIn(BaseModel):
    ok: bool
    csrf: str


def sign_in(request: Request, response: Response, door: Door, given: str) -> str:
    """Check the token and set the session cookie; its CSRF value. 401 / 429 otherwise."""
    client, now = client_of(request), door.clock()
    if door.limiter.blocked(client, now):
        raise HTTPException(429, "登录失败次数太多，请稍后再试")
    if not token_matches(given, door.token):
        door.limiter.failed(client, now)
        raise HTTPException(401, "令牌不对")
    door.limiter.succeeded(client)
    session = issue_session(door.token, now)
    response.set_cookie(
        COOKIE,
        session,
        max_age=int(SESSION.total_seconds()),
        httponly=True,
        secure=request.url.scheme == "https",  # behind a trusted proxy: its X-Forwarded-Proto
        samesite="strict",
        path="/pallas",
    )
    return csrf_for(session, door.token)


def door_routes(door: Door) -> APIRouter:
    router = APIRouter(prefix="/pallas/api", tags=["auth"])

    @router.post("/login", response_model=LoggedIn)
    async def login(body: Login, request: Request, response: Response) -> LoggedIn:
        return LoggedIn(ok=True, csrf=sign_in(request, response, door, body.token))

    @router.post("/logout")
    async def logout(response: Response) -> dict[str, bool]:
        response.delete_cookie(COOKIE, path="/pallas")
        return {"ok": True}

    return router
