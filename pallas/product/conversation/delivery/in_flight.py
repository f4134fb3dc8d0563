"""Which part of the bot each chat's message in flight comes from.

The platform may report the bot's message (NapCat's echo) before the send's own record
arrives, late after a send that timed out, or only when the platform's history is asked after
a crash; whichever copy is stored first is what the timeline keeps. A chat sends its rows
strictly in order, so the dispatcher holds the origin of the row it began sending until that
row is settled (sent, failed, unknown, expired), and the ingress asks this book by chat
(pallas/product/conversation/ingress.py). A message typed by hand on the bot's account in
that moment would take the row's origin: the price of a book with no text matching.
"""

from __future__ import annotations

from pallas.core.actions import Origin
from pallas.core.inbound import StreamKey


class InFlight:
    """The origin of the row each chat began sending and has not settled yet."""

    def __init__(self) -> None:
        self._origins: dict[StreamKey, Origin] = {}

    def origin_of(self, stream: StreamKey) -> Origin | None:
        return self._origins.get(stream)

    def hold(self, stream: StreamKey, origin: str) -> None:
        self._origins[stream] = Origin(origin)

    def release(self, stream: StreamKey) -> None:
        self._origins.pop(stream, None)
