"""A fake web site: a real HTTP/1.1 server on a loopback socket with scripted answers per path.

Tests of the web tools point them at it. Each path answers with a scripted response (a page,
a redirect, a stall, a huge or endless body, a JSON document); every request is recorded, so a
test can prove a request was never made. One request per connection (`connection: close`).

Hand-written on `asyncio.start_server` for the same reason as `fake_llm`: slow and oversized
answers need exact control of what goes on the wire and when.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

_MAX_HEADER_BYTES = 64 * 1024
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Page:
    """A complete answer sent at once (after `delay_s`)."""

    body: str | bytes = ""
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # wait before the status line (> the client's budget models a stall)


@dataclass(frozen=True)
class Redirect:
    location: str
    status: int = 302


@dataclass(frozen=True)
class Json:
    body: Any
    status: int = 200


@dataclass(frozen=True)
class Big:
    """A body of `size` bytes of filler text, written in chunks (never held whole)."""

    size: int
    content_type: str = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Endless:
    """A chunked body that never ends; `interval_s` > 0 trickles one small chunk at a time."""

    content_type: str = "text/html; charset=utf-8"
    interval_s: float = 0.0


Scripted = Page | Redirect | Json | Big | Endless


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str  # with the query string
    headers: dict[str, str]  # lower-cased names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class FakeWebServer:
    """Plain HTTP, or HTTPS when given a server `ssl_context`."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self._ssl = ssl_context
        self.routes: dict[str, Scripted] = {}
        self.requests: list[RecordedRequest] = []
        self.bytes_sent = 0  # body bytes handed to the socket, for size-cap tests
        self._server: asyncio.Server | None = None
        self._port = 0
        self._handlers: set[asyncio.Task[Any]] = set()

    async def __aenter__(self) -> FakeWebServer:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", 0, limit=_MAX_HEADER_BYTES, ssl=self._ssl
        )
        self._port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await asyncio.sleep(0)  # let just-accepted connections reach their handler
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await self._server.wait_closed()

    @property
    def port(self) -> int:
        return self._port

    def url(self, path: str = "/") -> str:
        scheme = "https" if self._ssl else "http"
        return f"{scheme}://127.0.0.1:{self._port}{path}"

    def paths(self) -> list[str]:
        return [request.path for request in self.requests]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            request = await _read_request(reader)
            if request is not None:
                self.requests.append(request)
                answer = self.routes.get(request.path, Page("not found", "text/plain", 404))
                await self._answer(writer, answer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client hung up (as a capped reader does) or the server is stopping
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _answer(self, writer: asyncio.StreamWriter, answer: Scripted) -> None:
        match answer:
            case Page():
                await asyncio.sleep(answer.delay_s)
                body = answer.body.encode() if isinstance(answer.body, str) else answer.body
                headers = {"content-type": answer.content_type, **answer.headers}
                await self._send(writer, answer.status, headers, body)
            case Redirect():
                headers = {"location": answer.location, "content-type": "text/plain"}
                await self._send(writer, answer.status, headers, b"moved")
            case Json():
                body = json.dumps(answer.body).encode()
                await self._send(writer, answer.status, {"content-type": "application/json"}, body)
            case Big():
                await self._send_big(writer, answer)
            case Endless():
                await self._send_endless(writer, answer)

    async def _send(
        self, writer: asyncio.StreamWriter, status: int, headers: dict[str, str], body: bytes
    ) -> None:
        writer.write(_head(status, {**headers, "content-length": str(len(body))}) + body)
        self.bytes_sent += len(body)
        await writer.drain()

    async def _send_big(self, writer: asyncio.StreamWriter, big: Big) -> None:
        headers = {"content-type": big.content_type, "content-length": str(big.size)}
        writer.write(_head(200, headers))
        line = b"filler text, line after line of it.\n"
        chunk = (line * (_CHUNK // len(line) + 1))[:_CHUNK]
        remaining = big.size
        while remaining > 0:
            piece = chunk[: min(remaining, _CHUNK)]
            writer.write(piece)
            await writer.drain()
            self.bytes_sent += len(piece)
            remaining -= len(piece)

    async def _send_endless(self, writer: asyncio.StreamWriter, endless: Endless) -> None:
        headers = {"content-type": endless.content_type, "transfer-encoding": "chunked"}
        writer.write(_head(200, headers))
        piece = b"<p>more and more</p>\n" * (1 if endless.interval_s else 2048)
        while True:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            self.bytes_sent += len(piece)
            await asyncio.sleep(endless.interval_s)


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    method, target, _version = request_line.split(" ", 2)
    headers: dict[str, str] = {}
    for line in header_lines:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return RecordedRequest(method, target, headers, body)


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append("connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
