"""The HTTP server NoneBot runs (uvicorn), with its limits set explicitly (docs/security.md).

uvicorn closes an idle keep-alive connection and can cap concurrent connections, but it has
no deadline for a request's head: a client that sends half a request line holds its
connection for ever, and with httptools a head of any size is buffered. The protocol here
adds both: a connection waiting for a request head gets HEAD_TIMEOUT_S seconds and
MAX_HEAD_BYTES bytes for it, then is closed; one address holds at most MAX_PER_ADDRESS
connections. A request answered before its body arrived (413, 401) lingers: the rest of the
body is read and dropped for up to LINGER_S, so a client that sends it all before reading
still reads the answer instead of a reset. Bodies are
bounded by the console's boundary middleware (pallas/console/boundary.py); WebSocket frames
by uvicorn's `ws_max_size`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from loguru import logger
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from pallas.config import Settings

LINGER_S = 5.0  # how long the rest of a refused body is read and dropped before closing
HEAD_TIMEOUT_S = 10.0  # from the first byte of a request (or the connection) to its last header
MAX_HEAD_BYTES = 64 * 1024  # request line and headers together
KEEP_ALIVE_S = 5  # an idle keep-alive connection is closed after this
MAX_CONNECTIONS = 1000  # past this uvicorn answers 503 (NapCat's sockets count too)
MAX_PER_ADDRESS = 256  # one address cannot take the whole server; past this, closed at once
WS_MAX_BYTES = 16 * 1024 * 1024  # one WebSocket message from NapCat


# httptools reports where each request begins and where its head ends; h11 (the fallback)
# does not, and there a head counts as done when uvicorn starts its request.
_PARSER_HOOKS = hasattr(AutoHTTPProtocol, "on_headers_complete")


class HeadDeadlineProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
    """uvicorn's own HTTP protocol (httptools or h11, as uvicorn picks), with a deadline and
    a size cap for each request head. A request whose head is complete is the app's to
    serve, however long it takes; the WebSocket protocol takes over an upgraded socket."""

    head_timeout_s = HEAD_TIMEOUT_S
    max_head_bytes = MAX_HEAD_BYTES
    linger_s = LINGER_S
    max_per_address = MAX_PER_ADDRESS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        if self._peer_connections() > self.max_per_address:
            logger.debug("http: more than {} connections from {}; closed", self.max_per_address,
                         self.client[0] if self.client else "?")  # fmt: skip
            transport.close()
            return
        self._open_head()

    def data_received(self, data: bytes) -> None:
        if self._between_bodies():
            self._open_head()  # the next request's first bytes (a no-op while one is open)
        before = self.cycle
        super().data_received(data)
        if not self._still_ours() or (not _PARSER_HOOKS and self.cycle is not before):
            self._close_head()  # upgraded to a WebSocket, or (h11) a request began
        if self._head_timer is not None:
            self._head_bytes += len(data)
            if self._head_bytes > self.max_head_bytes and not self.transport.is_closing():
                logger.warning("http: a request head past {} bytes; connection closed",
                               self.max_head_bytes)  # fmt: skip
                self.transport.close()

    def on_message_begin(self) -> None:  # httptools: a request (perhaps pipelined) begins
        super().on_message_begin()
        self._open_head()

    def on_headers_complete(self) -> None:  # httptools: its head is complete
        self._close_head()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._draining():
            self.loop.call_later(self.linger_s, self._linger_over, self.cycle)

    def connection_lost(self, exc: Exception | None) -> None:
        self._close_head()
        super().connection_lost(exc)

    def _peer_connections(self) -> int:
        """This server's open connections from this one's address, itself included."""
        if not self.client:
            return 0
        host = self.client[0]
        return sum(
            1 for other in self.connections if (getattr(other, "client", None) or ("",))[0] == host
        )

    def _between_bodies(self) -> bool:
        """Whether bytes arriving now can only be a request head: no request yet, or the
        current one's body is complete (kept alive, or pipelined behind a long answer)."""
        return self.cycle is None or not self.cycle.more_body

    def _draining(self) -> bool:
        """Answered, but the request's body is still arriving (read and dropped)."""
        return self.cycle is not None and self.cycle.response_complete and self.cycle.more_body

    def _linger_over(self, cycle: Any) -> None:
        if self.cycle is cycle and self._draining() and not self.transport.is_closing():
            self.transport.close()

    def _still_ours(self) -> bool:
        return self.transport.get_protocol() is self

    def _open_head(self) -> None:
        if self._head_timer is None:
            self._head_bytes = 0
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._expired)

    def _close_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _expired(self) -> None:
        self._head_timer = None
        if self._still_ours() and not self.transport.is_closing():
            self.transport.close()  # a pipelined half head ends an answer still streaming


def server_options(settings: Settings) -> dict[str, Any]:
    """What `nonebot.run()` hands to uvicorn: the limits above and whose forwarding headers
    to believe (none unless PALLAS_TRUSTED_PROXIES names the proxies)."""
    trusted = list(settings.pallas_trusted_proxies)
    return {
        "http": HeadDeadlineProtocol,
        "timeout_keep_alive": KEEP_ALIVE_S,
        "limit_concurrency": MAX_CONNECTIONS,
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
        "ws_max_size": WS_MAX_BYTES,
        "proxy_headers": bool(trusted),
        "forwarded_allow_ips": trusted,
    }
