"""The server's own limits, over real sockets: a request head has a deadline and a size cap,
a refused body lingers so its answer is read, and the options handed to uvicorn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from uvicorn.middleware.proxy_headers import _TrustedHosts
from websockets.asyncio.client import connect

from pallas.config import Settings
from pallas.platform.http_server import (
    MAX_CONNECTIONS,
    MAX_PER_ADDRESS,
    HeadDeadlineProtocol,
    server_options,
)
from tests.support.raw_http import closed_within, open_from, request_head, serving

SHORT_S = 0.5


class QuickDeadline(HeadDeadlineProtocol):
    """The real protocol with deadlines short enough for a test."""

    head_timeout_s = SHORT_S
    linger_s = SHORT_S
    max_head_bytes = 4096
    max_per_address = 60


async def slow(_: Request) -> PlainTextResponse:
    await asyncio.sleep(SHORT_S * 3)  # a head that is complete may take its time
    return PlainTextResponse("done")


async def refuse_unread(_: Request) -> JSONResponse:
    return JSONResponse({"detail": "too large"}, status_code=413)  # the body is never read


APP = Starlette(
    routes=[
        Route("/ok", lambda _: PlainTextResponse("ok")),
        Route("/slow", slow),
        Route("/refuse", refuse_unread, methods=["POST"]),
    ]
)


@pytest.fixture(scope="module")
async def port() -> AsyncIterator[int]:
    async with serving(APP, http=QuickDeadline, timeout_keep_alive=5) as bound:
        yield bound


async def get(port: int, path: str = "/ok") -> bytes:
    reader, writer = await open_from(port)
    writer.write(request_head("GET", path, {"Connection": "close"}))
    answer = await reader.read()
    writer.close()
    return answer


async def test_a_connection_that_sends_nothing_is_closed_after_the_deadline(port: int) -> None:
    reader, writer = await open_from(port)
    assert await closed_within(reader, SHORT_S * 6)
    writer.close()


async def test_half_sent_heads_are_dropped_while_whole_requests_are_served(port: int) -> None:
    held = [await open_from(port) for _ in range(50)]
    for _, writer in held:
        writer.write(b"GET /ok HTTP/1.1\r\nHost: x\r\n")  # never the blank line
    assert (await get(port)).startswith(b"HTTP/1.1 200")
    closed = await asyncio.gather(*(closed_within(r, SHORT_S * 6) for r, _ in held))
    assert all(closed)
    for _, writer in held:
        writer.close()


async def test_one_address_cannot_hold_every_connection(port: int) -> None:
    held = [await open_from(port, "127.0.0.21") for _ in range(60)]
    reader, writer = await open_from(port, "127.0.0.21")  # one past the cap
    assert await closed_within(reader, SHORT_S / 2)  # at once, not at the head deadline
    served_reader, served_writer = await open_from(port, "127.0.0.22")
    served_writer.write(request_head("GET", "/ok", {"Connection": "close"}))
    assert (await served_reader.read()).startswith(b"HTTP/1.1 200")
    for _, each in [*held, (reader, writer), (served_reader, served_writer)]:
        each.close()


async def test_a_head_sent_a_byte_at_a_time_gets_no_more_time(port: int) -> None:
    reader, writer = await open_from(port)
    closed = asyncio.create_task(closed_within(reader, SHORT_S * 6))
    for byte in b"GET /ok HTTP/1.1\r\nHost: x\r\nX-Slow: ":
        if closed.done():
            break
        writer.write(bytes([byte]))
        await asyncio.sleep(SHORT_S / 5)
    assert await closed
    writer.close()


async def test_the_next_request_on_a_kept_alive_connection_has_a_deadline_too(port: int) -> None:
    reader, writer = await open_from(port)
    writer.write(request_head("GET", "/ok", {}))
    assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
    writer.write(b"GET /ok HTTP/1.1\r\n")  # the keep-alive timer stops; ours does not
    assert await closed_within(reader, SHORT_S * 6)
    writer.close()


async def test_a_half_head_pipelined_behind_a_long_answer_has_the_deadline_too(
    port: int,
) -> None:
    reader, writer = await open_from(port)
    writer.write(request_head("GET", "/slow", {}) + b"GET /ok HTTP/1.1\r\nX-Held: ")
    assert await closed_within(reader, SHORT_S * 6)
    writer.close()


async def test_a_complete_head_is_the_apps_to_answer_however_long(port: int) -> None:
    assert (await get(port, "/slow")).endswith(b"done")


async def test_a_head_past_the_size_cap_closes_the_connection(port: int) -> None:
    reader, writer = await open_from(port)
    writer.write(b"GET /ok HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"a" * 8000)
    assert await closed_within(reader, SHORT_S * 6)
    writer.close()


async def test_a_body_refused_unread_lingers_so_the_client_reads_the_answer(port: int) -> None:
    reader, writer = await open_from(port)
    body = b"0" * (4 * 1024 * 1024)  # sent whole before reading, as simple clients do
    writer.write(request_head("POST", "/refuse", {"Content-Length": str(len(body))}) + body)
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 413")
    writer.close()


async def test_an_upgraded_socket_is_not_cut_by_the_head_deadline() -> None:
    async def echo(websocket: Any) -> None:
        await websocket.accept()
        await asyncio.sleep(SHORT_S * 3)
        await websocket.send_text("still here")
        await websocket.close()

    app = Starlette(routes=[WebSocketRoute("/ws", echo)])
    async with (
        serving(app, http=QuickDeadline) as bound,
        connect(f"ws://127.0.0.1:{bound}/ws") as ws,
    ):
        assert await asyncio.wait_for(ws.recv(), 10) == "still here"


def test_the_options_name_the_limits_and_trust_no_proxy_by_default() -> None:
    options = server_options(Settings(_env_file=None))
    assert options["http"] is HeadDeadlineProtocol
    assert options["limit_concurrency"] == MAX_CONNECTIONS and options["timeout_keep_alive"] == 5
    assert MAX_PER_ADDRESS < MAX_CONNECTIONS  # one address never takes the whole server
    assert options["proxy_headers"] is False and options["forwarded_allow_ips"] == []


def test_named_proxies_are_the_only_ones_believed() -> None:
    proxies = ["10.0.0.0/8", " 127.0.0.1 ", "10.0.0.1/8", "::1"]
    options = server_options(Settings(_env_file=None, pallas_trusted_proxies=proxies))
    assert options["proxy_headers"] is True
    # each in the strict form uvicorn matches (it would take "10.0.0.1/8" for a host name)
    assert options["forwarded_allow_ips"] == ["10.0.0.0/8", "127.0.0.1", "10.0.0.0/8", "::1"]
    trusted = _TrustedHosts(options["forwarded_allow_ips"])
    assert "10.9.8.7" in trusted and "127.0.0.1" in trusted and "192.168.0.1" not in trusted
