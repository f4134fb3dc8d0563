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
        self._arm()

    def data_received(self, data: bytes) -> None:
        waiting = self._waiting_for_head()
        if waiting:
            self._arm()
        before = self.cycle
        super().data_received(data)
        if self.cycle is not before or not self._still_ours():
            self._disarm()  # a head completed (or the socket was upgraded)
            self._head_bytes = 0
        elif waiting and self._waiting_for_head():
            self._head_bytes += len(data)
            if self._head_bytes > self.max_head_bytes and not self.transport.is_closing():
                logger.warning("http: a request head past {} bytes; connection closed",
                               self.max_head_bytes)  # fmt: skip
                self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._draining():
            self.loop.call_later(self.linger_s, self._linger_over, self.cycle)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _peer_connections(self) -> int:
        """This server's open connections from this one's address, itself included."""
        if not self.client:
            return 0
        host = self.client[0]
        return sum(
            1 for other in self.connections if (getattr(other, "client", None) or ("",))[0] == host
        )

    def _waiting_for_head(self) -> bool:
        return self.cycle is None or (self.cycle.response_complete and not self.cycle.more_body)

    def _draining(self) -> bool:
        """Answered, but the request's body is still arriving (read and dropped)."""
        return self.cycle is not None and self.cycle.response_complete and self.cycle.more_body

    def _linger_over(self, cycle: Any) -> None:
        if self.cycle is cycle and self._draining() and not self.transport.is_closing():
            self.transport.close()

    def _still_ours(self) -> bool:
        return self.transport.get_protocol() is self

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _expired(self) -> None:
        self._head_timer = None
        if self._waiting_for_head() and self._still_ours() and not self.transport.is_closing():
            self.transport.close()


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
