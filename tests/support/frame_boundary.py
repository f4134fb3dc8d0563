"""The OneBot frame boundary under test, the way the running bot receives a frame: the
adapter's frame loop, PallasBot.handle_event with the ingress hook over a real Ingress and
TimelineWriter on SQLite, then NoneBot's dispatch with no matchers. `check_frame` holds the
whole promise for one frame (see tests/platform/onebot/test_frame_properties.py)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import nonebot
import nonebot.message
import pytest
from loguru import logger
from nonebot.adapters.onebot.v11 import Event
from nonebot.drivers import WebSocket
from nonebot.exception import NoLogException, WebSocketClosed
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import InboundMessage, poke_id
from pallas.platform.onebot import adapter as adapter_module
from pallas.platform.onebot.adapter import (
    FrameError,
    PallasBot,
    PallasOneBotAdapter,
    read_event_frame,
)
from pallas.platform.onebot.lookups import PlatformLookups
from pallas.platform.onebot.translate import (
    Translation,
    UnsupportedEventError,
    translate_event,
)
from pallas.product.conversation.ingress import Ingress
from pallas.store.engine import create_engine
from pallas.store.migrate import upgrade_to_head
from pallas.store.poke_echoes import ECHO_WINDOW
from pallas.store.timeline import TimelineWriter
from tests.support.timeline_db import TimelineDb

if TYPE_CHECKING:
    from loguru import Message as LogMessage

from tests.support.frame_strategies import (
    MAX_LINE_CHARS,
    MAX_WARNING_LINES,
    NOW_S,
    SELF_ID,
    expected_home,
)

# -- the boundary under test ---------------------------------------------------------------


class _OneFrame:
    """The part of NoneBot's WebSocket the adapter's frame loop uses: one frame, then closed."""

    def __init__(self, data: str | bytes) -> None:
        self._frames = [data]

    async def receive(self) -> str | bytes:
        if self._frames:
            return self._frames.pop()
        raise WebSocketClosed(1000)


@dataclass
class Delivery:
    event: Event | None
    translation: Translation | None
    refused: Exception | None  # the FrameError / UnsupportedEventError, if any


def log_string(event: Event) -> str | None:
    """What NoneBot logs when it dispatches the event (None: the event asks not to be logged)."""
    try:
        return event.get_log_string()
    except NoLogException:
        return None


@dataclass
class PluginConversation:
    ingress: Ingress


@dataclass
class PluginRuntime:
    """What the ingress plugin takes from the runtime (packages/_runtime.py), for real."""

    engine: AsyncEngine
    conversation: PluginConversation
    lookups: PlatformLookups


class Boundary:
    def __init__(
        self,
        bot: PallasBot,
        runtime: PluginRuntime,
        db: TimelineDb,
        capfd: pytest.CaptureFixture[str],
    ) -> None:
        self.bot = bot
        self.adapter = cast(PallasOneBotAdapter, bot.adapter)
        self.runtime = runtime
        self.db = db
        self.capfd = capfd
        self.records: list[tuple[int, str]] = []  # (level number, formatted text), WARNING+

    def capture(self, message: LogMessage) -> None:
        self.records.append((message.record["level"].no, str(message)))

    async def deliver(self, data: str | bytes) -> Delivery:
        """Read the frame directly (the exceptions are the promise), then as the bot does."""
        event: Event | None = None
        translation: Translation | None = None
        refused: Exception | None = None
        try:
            event = read_event_frame(data, SELF_ID, now_s=NOW_S)
        except FrameError as exc:
            refused = exc
        if event is not None:
            log_string(event)
            try:
                translation = translate_event(event)
            except UnsupportedEventError as exc:
                refused = exc

        self.records.clear()
        self.capfd.readouterr()
        before = set(self.adapter.tasks)
        await self.adapter._receive_frames(cast(WebSocket, _OneFrame(data)), self.bot)
        pending = set(self.adapter.tasks) - before
        if pending:
            await asyncio.wait(pending)
        await self.runtime.lookups.drain()  # NapCat is not there: each look-up fails at once
        self.check_logs(data)
        return Delivery(event, translation, refused)

    def check_logs(self, data: str | bytes) -> None:
        lines = [line for _, text in self.records for line in text.rstrip("\n").splitlines()]
        shown = "\n".join(lines)[:3000]
        where = f"frame {excerpt_of(data)}; logged:\n{shown}"
        assert all(level < 40 for level, _ in self.records), f"error logged for {where}"
        assert len(lines) <= MAX_WARNING_LINES, f"{len(lines)} warning lines for {where}"
        for line in lines:
            assert len(line) < MAX_LINE_CHARS, f"warning line of {len(line)} chars for {where}"
            assert "Traceback" not in line, f"traceback logged for {where}"
            line.encode("utf-8")  # a line no UTF-8 sink can write is a logging error
        out, err = self.capfd.readouterr()
        assert "Logging error" not in out + err, f"logging error for {where}:\n{err[-2000:]}"

    def stored(self, stream_kind: str, external_ids: frozenset[str] | None, pid: str) -> list[Any]:
        return [
            row
            for row in self.db.messages(pid)
            if row["stream_self_id"] == SELF_ID
            and row["stream_kind"] == stream_kind
            and (external_ids is None or row["stream_external_id"] in external_ids)
        ]

    async def check_frame(self, frame: Any, data: str | bytes, *, times: int = 1) -> list[Delivery]:
        """Deliver `data` (`frame` serialized) `times` times and hold the whole promise."""
        home = expected_home(frame)
        deliveries = [await self.deliver(data) for _ in range(times)]
        first = deliveries[0]
        where = f"frame {excerpt_of(data)}"
        if home is not None:
            assert first.refused is None, f"readable message refused ({first.refused}): {where}"
            rows = self.stored(home.kind, home.external_ids, home.platform_message_id)
            assert len(rows) == 1, f"{len(rows)} rows for readable message: {where}"
            check_row(rows[0], where)
        inbound = first.translation.event if first.translation is not None else None
        if isinstance(inbound, InboundMessage):
            key = inbound.stream
            assert key.self_id == SELF_ID, where
            rows = [
                row
                for pid in stored_ids(inbound)
                for row in self.stored(str(key.kind), frozenset({key.external_id}), pid)
            ]
            assert len(rows) == 1, f"{len(rows)} rows for translated message: {where}"
            check_row(rows[0], where)
        return deliveries


def stored_ids(msg: InboundMessage) -> list[str]:
    """The ids the message may be stored under (see pallas/store/poke_echoes.py)."""
    if not (msg.is_poke and msg.from_bot and msg.mentions):
        return [msg.platform_message_id]
    # The bot's own poke takes the id of the same poke stored a few seconds before, if any.
    second = int(msg.time.timestamp())
    window = int(ECHO_WINDOW.total_seconds())
    return [
        poke_id(msg.sender.user_id, msg.mentions[0], s)
        for s in range(second - window, second + window + 1)
    ]


def check_row(row: Any, where: str) -> None:
    text = row["text"]
    assert isinstance(text, str), where
    text.encode("utf-8")  # strict: a lone surrogate here would not survive PostgreSQL either
    json.loads(row["segments"])


def excerpt_of(data: str | bytes) -> str:
    return repr(data[:600]) + (f"… ({len(data)} long)" if len(data) > 600 else "")


def _utf8_sink(message: LogMessage) -> None:
    """What a log file opened as UTF-8 does with a line; a failure is a loguru logging error."""

    str(message).encode("utf-8")


@pytest.fixture
async def boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> AsyncIterator[Boundary]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'store.db'}")
    await upgrade_to_head(engine)
    writer = TimelineWriter(engine)
    writer.start()
    ingress = Ingress(writer)  # no next stage: messages are recorded, nothing more
    runtime = PluginRuntime(engine, PluginConversation(ingress), PlatformLookups(ingress))
    adapter = nonebot.get_adapter(PallasOneBotAdapter)
    hook = adapter.inbound_hook
    assert hook is not None and hook.__module__ == "packages.ingress"  # tests/conftest.py
    monkeypatch.setattr(sys.modules[hook.__module__], "current_runtime", lambda: runtime)
    monkeypatch.setattr(nonebot.message, "matchers", {})  # dispatch, but run no plugin
    # The adapter's arrival clock, fixed: it stands in for unusable times (and poke ids).
    monkeypatch.setattr(adapter_module, "time", SimpleNamespace(time=lambda: NOW_S))
    bot = PallasBot(adapter, SELF_ID)
    harness = Boundary(bot, runtime, TimelineDb(tmp_path / "store.db"), capfd)
    sinks = [
        logger.add(harness.capture, level="WARNING", format="{time} [{level}] {name} | {message}"),
        logger.add(_utf8_sink, level="DEBUG", format="{time} [{level}] {name} | {message}"),
    ]
    try:
        yield harness
    finally:
        for sink in sinks:
            logger.remove(sink)
        await writer.close()
        await engine.dispose()
