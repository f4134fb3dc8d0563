"""The console's boundary middleware over a real server socket, in front of a small app that
records what reached it: bodies are counted before anything reads them, credentials are
settled from the headers, errors are plain 500s, and every answer has the security headers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from pallas.console.auth import COOKIE, Caller, issue_session
from pallas.console.boundary import (
    PUBLIC_BODY_BYTES,
    SIGNED_IN_BODY_BYTES,
    BodyLimits,
    Boundary,
    Refusal,
    answer_for,
    body_limit,
    declared_length,
    refusal_before_body,
)
from pallas.console.guard import Door
from tests.support.raw_http import open_from, request_head, serving, stream_body

TOKEN = "boundary-test-token"
NOW = datetime(2026, 12, 1, tzinfo=UTC)
BEARER = {"Authorization": f"Bearer {TOKEN}"}
LIMITS = BodyLimits(timeout_s=0.5)
reached: list[str] = []  # the paths the app saw, in order


async def echo(request: Request) -> JSONResponse:
    reached.append(request.url.path)
    return JSONResponse({"bytes": len(await request.body())})


async def fail(request: Request) -> JSONResponse:
    reached.append(request.url.path)
    raise RuntimeError("secret internals /srv/pallas/app.py line 12")


async def cached(_: Request) -> JSONResponse:
    return JSONResponse({}, headers={"cache-control": "max-age=60"})


async def events(request: Request) -> StreamingResponse:
    async def lines() -> AsyncIterator[str]:
        for n in range(3):
            await asyncio.sleep(0.4)  # longer in all than the body deadline
            yield f"data: {n}\n\n"

    return StreamingResponse(lines(), media_type="text/event-stream")


def app() -> Starlette:
    """Mounted as the console mounts it: inside Starlette's own error middleware."""
    door = Door(token_of=lambda: TOKEN, clock=lambda: NOW)
    return Starlette(
        routes=[
            Route("/pallas/api/things", echo, methods=["GET", "PUT"]),
            Route("/pallas/login", echo, methods=["POST"]),
            Route("/pallas/api/fail", fail),
            Route("/pallas/api/cached", cached),
            Route("/pallas/api/events", events),
            Route("/onebot/v11/http", echo, methods=["POST"]),
        ],
        middleware=[Middleware(Boundary, door=door, limits=LIMITS)],
    )


@pytest.fixture(scope="module")
async def port() -> AsyncIterator[int]:
    async with serving(app()) as bound:
        yield bound


@pytest.fixture
async def http(port: int) -> AsyncIterator[httpx.AsyncClient]:
    reached.clear()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        yield client


# -- the decisions ---------------------------------------------------------------------------


def test_the_limit_is_small_until_the_caller_is_known() -> None:
    limits = BodyLimits()
    assert body_limit("/pallas/api/login", False, limits) == PUBLIC_BODY_BYTES
    assert body_limit("/pallas/api/settings/gate/1", True, limits) == SIGNED_IN_BODY_BYTES
    assert body_limit("/onebot/v11/http", False, limits) == SIGNED_IN_BODY_BYTES


def test_a_guarded_change_without_credentials_is_refused_from_its_head() -> None:
    anonymous, bearer, cookie = Caller.ANONYMOUS, Caller.BEARER, Caller.COOKIE
    change = "/pallas/api/settings/gate/1"
    assert refusal_before_body(change, "PUT", anonymous, False) is Refusal.SIGN_IN_FIRST
    assert refusal_before_body("/pallas/tools/tool/x", "POST", anonymous, False) is not None
    assert refusal_before_body(change, "PUT", bearer, False) is None
    assert refusal_before_body(change, "PUT", cookie, False) is None
    assert refusal_before_body("/pallas/api/overview", "GET", anonymous, False) is None
    for public in ("/pallas/api/login", "/pallas/login", "/pallas/api/logout"):
        assert refusal_before_body(public, "POST", anonymous, False) is None
    assert refusal_before_body("/onebot/v11/http", "POST", anonymous, False) is None


def test_a_wrong_token_is_refused_and_a_blocked_address_waits_even_with_the_right_one() -> None:
    overview = "/pallas/api/overview"
    assert refusal_before_body(overview, "GET", Caller.WRONG_TOKEN, False) is Refusal.WRONG_TOKEN
    assert refusal_before_body(overview, "GET", Caller.WRONG_TOKEN, True) is Refusal.BLOCKED
    assert refusal_before_body(overview, "GET", Caller.BEARER, True) is Refusal.BLOCKED
    assert refusal_before_body(overview, "GET", Caller.COOKIE, True) is None  # signed in before
    assert refusal_before_body("/pallas/api/health", "GET", Caller.WRONG_TOKEN, True) is None
    # NapCat's own bearer token (ONEBOT_ACCESS_TOKEN) is none of the console's business
    assert refusal_before_body("/onebot/v11/http", "POST", Caller.WRONG_TOKEN, False) is None


def test_refusals_answer_as_the_routes_guard_would() -> None:
    assert answer_for(Refusal.SIGN_IN_FIRST, "/pallas/api/x").status == 401
    assert answer_for(Refusal.SIGN_IN_FIRST, "/pallas/sandbox/a/say").status == 401
    page = answer_for(Refusal.SIGN_IN_FIRST, "/pallas/persons/1/lift")
    assert (page.status, page.location) == (303, "/pallas/login")
    assert answer_for(Refusal.WRONG_TOKEN, "/pallas/api/x").status == 401
    assert answer_for(Refusal.BLOCKED, "/pallas/api/x").status == 429
    assert answer_for(Refusal.TOO_LARGE, "/x").status == 413
    assert answer_for(Refusal.TOO_SLOW, "/x").status == 408


def test_a_declared_length_is_read_only_when_it_is_a_number() -> None:
    assert declared_length({b"content-length": b"123"}) == 123
    for odd in (b"", b"-1", b"12a", b"9" * 5_000):
        assert declared_length({b"content-length": odd}) is None


# -- over the socket -----------------------------------------------------------------------


async def test_a_change_without_credentials_never_reaches_the_route(
    http: httpx.AsyncClient,
) -> None:
    answer = await http.put("/pallas/api/things", content=b"x" * 10_000)
    assert answer.status_code == 401 and answer.json()["detail"].startswith("需要登录")
    wrong = await http.put(
        "/pallas/api/things", content=b"{}", headers={"Authorization": "Bearer no"}
    )
    assert wrong.status_code == 401 and reached == []


async def test_wrong_tokens_count_as_failed_sign_ins_of_their_address(port: int) -> None:
    transport = httpx.AsyncHTTPTransport(local_address="127.0.0.30")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", transport=transport) as c:
        wrong = {"Authorization": "Bearer guess"}
        codes = [(await c.get("/pallas/api/things", headers=wrong)).status_code for _ in range(6)]
        assert codes == [401] * 5 + [429]
        assert (await c.get("/pallas/api/things", headers=BEARER)).status_code == 429
        session = {"Cookie": f"{COOKIE}={issue_session(TOKEN, NOW)}"}
        assert (await c.get("/pallas/api/things", headers=session)).status_code == 200
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as other:
        assert (await other.get("/pallas/api/things", headers=BEARER)).status_code == 200


async def test_a_streamed_public_body_is_cut_at_the_small_limit(port: int) -> None:
    answer = await stream_body(port, "POST", "/pallas/login", 20 * 1024 * 1024)
    assert answer.status == 413
    assert answer.body_sent < 20 * 1024 * 1024


async def test_a_declared_length_past_the_limit_is_refused_unread(port: int) -> None:
    reached.clear()
    answer = await stream_body(port, "POST", "/pallas/login", 10 * 1024 * 1024, chunked=False)
    assert answer.status == 413 and reached == []


async def test_a_signed_in_caller_gets_the_larger_limit(http: httpx.AsyncClient) -> None:
    fits = await http.put("/pallas/api/things", content=b"x" * 500_000, headers=BEARER)
    assert fits.status_code == 200 and fits.json() == {"bytes": 500_000}
    session = issue_session(TOKEN, NOW)
    cookie = {"Cookie": f"{COOKIE}={session}"}
    by_cookie = await http.put("/pallas/api/things", content=b"x" * 100_000, headers=cookie)
    assert by_cookie.json() == {"bytes": 100_000}


async def test_a_signed_in_body_past_its_limit_is_refused(port: int) -> None:
    answer = await stream_body(port, "PUT", "/pallas/api/things", 8 * 1024 * 1024, headers=BEARER)
    assert answer.status == 413


async def test_platform_routes_have_the_larger_limit(port: int) -> None:
    assert (await stream_body(port, "POST", "/onebot/v11/http", 100_000)).status == 200
    assert (await stream_body(port, "POST", "/onebot/v11/http", 8 * 1024 * 1024)).status == 413


async def test_a_body_that_trickles_past_the_deadline_is_refused(port: int) -> None:
    reader, writer = await open_from(port)
    head = request_head("POST", "/pallas/login", {"Content-Length": "100"})
    writer.write(head + b"x")
    head_back = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head_back.startswith(b"HTTP/1.1 408")
    writer.close()


async def test_an_unhandled_error_is_a_plain_500_and_the_connection_stays(
    http: httpx.AsyncClient,
) -> None:
    failed = await http.get("/pallas/api/fail")
    assert failed.status_code == 500
    assert "secret" not in failed.text and "Traceback" not in failed.text
    assert json.loads(failed.text)["detail"]
    again = await http.get("/pallas/api/things")  # the same pooled connection
    assert again.status_code == 200


async def test_every_answer_has_the_security_headers(http: httpx.AsyncClient) -> None:
    for answer in (
        await http.get("/pallas/api/things"),
        await http.put("/pallas/api/things", content=b"{}"),  # refused by the boundary
        await http.get("/pallas/api/fail"),
        await http.get("/pallas/no-such-page"),
    ):
        headers = answer.headers
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"
        assert headers["cache-control"] == "no-store"
    own = await http.get("/pallas/api/cached")
    assert own.headers["cache-control"] == "max-age=60"  # a route's own choice stands


async def test_a_stream_waiting_for_the_client_is_not_cut_by_the_body_deadline(
    http: httpx.AsyncClient,
) -> None:
    answer = await http.get("/pallas/api/events")
    assert answer.text.count("data:") == 3
