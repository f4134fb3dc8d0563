"""Which part of the bot each chat's message in flight comes from.

The platform may report the bot's message (NapCat's echo) before the send's own record
arrives; whichever comes first is what the timeline keeps. Both arrive while the dispatcher
still waits on the send, and a chat sends one row at a time, so asking this book by chat
gives the right origin to either (pallas/product/conversation/ingress.py asks it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pallas.core.actions import Origin
from pallas.core.inbound import StreamKey


class InFlight:
    """The origin of the row each chat is sending right now."""

    def __init__(self) -> None:
        self._origins: dict[StreamKey, Origin] = {}

    def origin_of(self, stream: StreamKey) -> Origin | None:
        return self._origins.get(stream)

    @contextmanager
    def sending(self, stream: StreamKey, origin: Origin) -> Iterator[None]:
        self._origins[stream] = origin
        try:
            yield
        finally:
            self._origins.pop(stream, None)
