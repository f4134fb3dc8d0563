"""The sandbox platform: a group chat with the bot inside the console, before (or without)
NapCat (docs/console.md).

  the console page -> sandbox_message(...) -> the same ingress, stages, gate, agent, outbox
  outbox -> RoutedOutlet -> SandboxOutlet.send: an id, recorded as the bot's own message (as
  NapCat's receipt would be), published to the page's event stream at the outbox's pace

Sandbox chats are ordinary chats of the store on platform `sandbox` and the reserved account
SANDBOX_SELF_ID, so they never mix with QQ's.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from loguru import logger

from pallas.core.actions import Capability, SentLookup
from pallas.core.inbound import InboundMessage, Segment, SegmentKind, Sender, StreamKey, StreamKind
from pallas.core.text import render_plain_text
from pallas.platform.onebot.send import Recorder, own_message, own_poke

SANDBOX = "sandbox"
SANDBOX_SELF_ID = "10000"  # QQ's own system account: never a bot's
MAX_LISTENERS = 64
QUEUE_SIZE = 256


@dataclass(frozen=True)
class SandboxLine:
    """One line as the sandbox page shows it."""

    message_id: str
    user_id: str
    text: str
    from_bot: bool
    time: datetime


def sandbox_stream(chat: str) -> StreamKey:
    return StreamKey(SANDBOX, SANDBOX_SELF_ID, StreamKind.GROUP, chat)


def sandbox_message(
    chat: str, member: str, name: str, text: str, at_bot: bool, message_id: str, now: datetime
) -> InboundMessage:
    """What a pretend member typed, in the standard shape (an @ of the bot first if asked)."""
    segments: list[Segment] = []
    if at_bot:
        segments.append(Segment(SegmentKind.AT, target=SANDBOX_SELF_ID))
    segments.append(Segment(SegmentKind.TEXT, text=text))
    return InboundMessage(
        stream=sandbox_stream(chat),
        sender=Sender(user_id=member, nickname=name),
        platform_message_id=message_id,
        time=now,
        segments=tuple(segments),
        text=render_plain_text(segments),
        mentions=(SANDBOX_SELF_ID,) if at_bot else (),
        stream_name=f"沙盒 {chat}",
    )


class MessageIds:
    """Numeric ids, unique across restarts (milliseconds, then a counter)."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self._counter = itertools.count()

    def next(self) -> str:
        return f"{int(self._clock().timestamp() * 1000)}{next(self._counter) % 1000:03d}"


class SandboxHub:
    """The pages listening to each sandbox chat (bounded); a slow page loses lines, never
    holds up the outbox."""

    def __init__(self) -> None:
        self._listeners: dict[str, set[asyncio.Queue[SandboxLine]]] = {}

    def listen(self, chat: str) -> asyncio.Queue[SandboxLine]:
        queue: asyncio.Queue[SandboxLine] = asyncio.Queue(QUEUE_SIZE)
        listeners = self._listeners.setdefault(chat, set())
        if len(listeners) >= MAX_LISTENERS:
            listeners.pop()
        listeners.add(queue)
        return queue

    def leave(self, chat: str, queue: asyncio.Queue[SandboxLine]) -> None:
        self._listeners.get(chat, set()).discard(queue)

    def publish(self, chat: str, line: SandboxLine) -> None:
        for queue in list(self._listeners.get(chat, ())):
            if queue.full():
                logger.warning("sandbox {}: a page is not reading; a line dropped", chat)
                continue
            queue.put_nowait(line)


class SandboxOutlet:
    """The Outlet of sandbox chats: every action succeeds and is recorded at once."""

    def __init__(self, recorder: Recorder, hub: SandboxHub, clock: Callable[[], datetime]):
        self._recorder = recorder
        self.hub = hub  # the pages listening
        self._clock = clock
        self.ids = MessageIds(clock)

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None:
        message_id, now = self.ids.next(), self._clock()
        shown = (Segment(SegmentKind.REPLY, target=quote), *segments) if quote else segments
        await self._recorder.accept(own_message(stream, tuple(shown), message_id, now))
        text = render_plain_text(segments)
        self.hub.publish(stream.external_id, SandboxLine(message_id, stream.self_id, text,
                                                          True, now))  # fmt: skip
        return message_id

    async def poke(self, stream: StreamKey, user_id: str) -> bool:
        now = self._clock()
        await self._recorder.accept(own_poke(stream, user_id, now))
        line = SandboxLine(self.ids.next(), stream.self_id, f"[戳了戳 {user_id}]", True, now)
        self.hub.publish(stream.external_id, line)
        return True

    async def react(self, stream: StreamKey, platform_message_id: str, reaction: str) -> bool:
        line = SandboxLine(self.ids.next(), stream.self_id, f"[给消息贴了{reaction}]", True,
                           self._clock())  # fmt: skip
        self.hub.publish(stream.external_id, line)
        return True

    async def capabilities(self, self_id: str) -> frozenset[Capability]:
        return frozenset({Capability.POKE, Capability.REACT})

    async def is_connected(self, self_id: str) -> bool:
        return True

    async def find_sent(self, stream: StreamKey, text: str, since: datetime) -> SentLookup:
        # A sandbox send is recorded as it happens: a send without its record did not happen.
        return SentLookup(answered=True)
