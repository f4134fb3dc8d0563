"""HTTP over a bare socket, for what ordinary clients will not do: stream a huge body while
reading the answer, send half a request and hold it, come from a chosen loopback address."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import uvicorn

from tests.support.bot_process import free_port
from tests.support.timeline_db import wait_for

CHUNK = 64 * 1024


@dataclass(frozen=True)
class RawAnswer:
    status: int
    head: str  # the status line and headers
    body_sent: int  # body bytes the server accepted before it answered or closed


def request_head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [
        f"{method} {quote(path, safe='/?=&%')} HTTP/1.1",
        "Host: 127.0.0.1",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def open_from(
    port: int, source: str = "127.0.0.1"
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the bot whose peer address is `source` (any 127.x.y.z works)."""
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


async def stream_body(
    port: int,
    method: str,
    path: str,
    total: int,
    *,
    headers: dict[str, str] | None = None,
    chunked: bool = True,
) -> RawAnswer:
    """Send `total` body bytes (chunked, or with a Content-Length) while reading; stop at the
    first answer or when the server stops reading. The answer's status, and what was sent."""
    given = {"Content-Type": "application/json", **(headers or {})}
    if chunked:
        given["Transfer-Encoding"] = "chunked"
    else:
        given["Content-Length"] = str(total)
    reader, writer = await open_from(port)
    answer = asyncio.create_task(_read_head(reader))
    sent = 0
    try:
        writer.write(request_head(method, path, given))
        while sent < total and not answer.done():
            size = min(CHUNK, total - sent)
            piece = b"0" * size
            writer.write(f"{size:x}\r\n".encode() + piece + b"\r\n" if chunked else piece)
            await writer.drain()
            await asyncio.sleep(0)  # let the reader see an answer that has come
            sent += size
        if chunked and sent >= total and not answer.done():
            writer.write(b"0\r\n\r\n")
            await writer.drain()
    except (ConnectionError, OSError):
        pass  # the server closed its side after answering; the answer is read below
    try:
        head = await asyncio.wait_for(answer, 30)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()
    return RawAnswer(int(head.split(" ", 2)[1]), head, sent)


async def _read_head(reader: asyncio.StreamReader) -> str:
    data = await reader.readuntil(b"\r\n\r\n")
    return data.decode("latin-1")


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    """Whether the server closes the connection (EOF or reset) within `seconds`."""
    try:
        async with asyncio.timeout(seconds):
            while await reader.read(4096):
                pass
    except TimeoutError:
        return False
    except (ConnectionError, OSError):
        return True
    return True


@contextlib.asynccontextmanager
async def serving(app: Any, **options: Any) -> AsyncIterator[int]:
    """`app` under a real uvicorn server on a loopback port, in this loop; the port."""
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, lifespan="off", log_level="warning", **options
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    await wait_for(lambda: server.started, what="in-process server")
    try:
        yield port
    finally:
        server.should_exit = True
        await task
