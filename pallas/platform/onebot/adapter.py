"""The OneBot v11 adapter, hardened for untrusted frames.

The upstream adapter closes the whole connection when one frame is not JSON, and logs the
full raw text of an event it cannot parse. Here every frame is handled on its own: a bad
frame costs one warning line with a short excerpt, and the connection stays up.

The bot object also skips the upstream `get_msg` round trip that resolves a quoted message
before any handler runs: ingress persists first and reads reply targets from the timeline.

Ingress runs as the adapter's inbound hook, before NoneBot dispatches the event: every event
is persisted before any preprocessor or matcher of any plugin sees it, and a duplicate never
reaches them. (A NoneBot event preprocessor would do the same, at about a third of the
throughput: see bench/README.md.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from loguru import logger as log
from nonebot.adapters.onebot.v11 import (
    Adapter,
    Bot,
    Event,
    Message,
    MessageEvent,
    MessageSegment,
)
from nonebot.adapters.onebot.v11.bot import _check_at_me, _check_nickname
from nonebot.drivers import URL, Driver, WebSocket, WebSocketServerSetup
from nonebot.exception import WebSocketClosed
from nonebot.message import handle_event
from typing_extensions import override

from pallas.core.numbers import json_int
from pallas.core.text import excerpt
from pallas.platform.onebot.frames import (
    MAX_DEPTH,
    clean_event,
    flatten_deep_json,
    frame_self_id,
)

REVERSE_WS_PATHS = ("/onebot/v11/ws", "/onebot/v11/ws/", "/onebot/v11/")
FRAME_TOO_BIG = 1009  # WebSocket close code for a message over the server's size limit
# Events handled at once; a flood beyond it waits as raw frames (about a tenth of the memory
# of an event being handled), in arrival order.
MAX_EVENTS_IN_FLIGHT = 256


# Called with each event before NoneBot sees it; returns False to stop the event there.
InboundHook = Callable[[Bot, Event], Awaitable[bool]]


class FrameError(ValueError):
    """A frame that is not a OneBot v11 event or API result."""


class PallasBot(Bot):
    @override
    async def handle_event(self, event: Event) -> None:
        if isinstance(event, MessageEvent):
            try:
                event.message.reduce()
                _check_at_me(self, event)
                _check_nickname(self, event)
            except Exception as exc:  # a malformed segment; ingress still records the rest
                log.warning(
                    "bot {}: could not read mentions of message {}: {!r}",
                    self.self_id,
                    event.message_id,
                    exc,
                )
        if await self._passes_inbound_hook(event):
            await handle_event(self, event)

    async def _passes_inbound_hook(self, event: Event) -> bool:
        adapter = self.adapter
        hook = adapter.inbound_hook if isinstance(adapter, PallasOneBotAdapter) else None
        if hook is None:
            return True
        try:
            return await hook(self, event)
        except Exception as exc:  # not recorded, so nothing may decide on it
            log.opt(exception=exc).error("bot {}: inbound hook failed; event stopped", self.self_id)
            return False


class PallasOneBotAdapter(Adapter):
    """Same name and protocol as the upstream adapter; per-frame fault isolation.

    Only reverse WebSocket is served: the upstream HTTP POST routes do not check the
    access token, so they are not registered at all.
    """

    inbound_hook: InboundHook | None = None
    # Raw frames whose events wait for a free handling slot, oldest first (see _dispatch_frame).
    _waiting: deque[tuple[PallasBot, str | bytes, int]]

    @override
    def __init__(self, driver: Driver, **kwargs: Any) -> None:
        super().__init__(driver, **kwargs)
        self._waiting = deque()

    def set_inbound_hook(self, hook: InboundHook) -> None:
        self.inbound_hook = hook

    @override
    def _setup(self) -> None:
        for path in REVERSE_WS_PATHS:
            self.setup_websocket_server(
                WebSocketServerSetup(URL(path), f"{self.get_name()} WS {path}", self._handle_ws)
            )
        self.driver.on_shutdown(self._stop)

    @override
    async def _handle_ws(self, websocket: WebSocket) -> None:
        self_id = websocket.request.headers.get("x-self-id")
        if not self_id:
            log.warning("NapCat connection refused: missing X-Self-ID header")
            await websocket.close(1008, "Missing X-Self-ID Header")
            return
        if self_id in self.bots:
            log.warning("NapCat connection refused: bot {} is already connected", self_id)
            await websocket.close(1008, "Duplicate X-Self-ID")
            return
        refused = self._check_access_token(websocket.request)
        if refused is not None:
            log.warning("NapCat connection for bot {} refused: bad access token", self_id)
            await websocket.close(1008, str(refused.content))
            return
        await websocket.accept()
        bot = PallasBot(self, self_id)
        self.bot_connect(bot)
        self.connections[self_id] = websocket
        log.info("bot {} connected", self_id)
        try:
            await self._receive_frames(websocket, bot)
        finally:
            with contextlib.suppress(Exception):
                await websocket.close()
            self.connections.pop(self_id, None)
            self.bot_disconnect(bot)
            log.info("bot {} disconnected", self_id)

    async def _receive_frames(self, websocket: WebSocket, bot: PallasBot) -> None:
        while True:
            try:
                data = await websocket.receive()
            except WebSocketClosed as exc:
                if exc.code == FRAME_TOO_BIG:
                    log.warning(
                        "bot {}: NapCat sent a frame over the size limit; the server closed "
                        "the connection (NapCat reconnects)",
                        bot.self_id,
                    )
                return
            except Exception as exc:  # the transport itself failed; the connection is gone
                log.warning("bot {}: connection lost: {!r}", bot.self_id, exc)
                return
            try:
                self._dispatch_frame(bot, data)
            except FrameError as exc:
                log.warning("bot {}: frame ignored: {}", bot.self_id, exc)
            except Exception as exc:
                log.opt(exception=exc).error("bot {}: frame handling failed", bot.self_id)

    def _dispatch_frame(self, bot: PallasBot, data: str | bytes) -> None:
        """Start handling the frame's event, or, with MAX_EVENTS_IN_FLIGHT already being
        handled, queue the raw frame behind the others. API results never wait: a handler in
        flight may be waiting for one."""
        arrived_s = int(time.time())
        if (self._waiting or len(self.tasks) >= MAX_EVENTS_IN_FLIGHT) and not _is_result(data):
            self._waiting.append((bot, data, arrived_s))
            return
        self._start(bot, data, arrived_s)

    def _start(self, bot: PallasBot, data: str | bytes, arrived_s: int) -> None:
        event = read_event_frame(data, bot.self_id, now_s=arrived_s)
        if event is None:
            return  # an API result, handed to the call waiting for it
        task = asyncio.create_task(bot.handle_event(event))
        task.add_done_callback(self._handled)
        self.tasks.add(task)

    def _handled(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        _log_failure(task)
        while self._waiting and len(self.tasks) < MAX_EVENTS_IN_FLIGHT:
            bot, data, arrived_s = self._waiting.popleft()
            try:
                self._start(bot, data, arrived_s)
            except FrameError as exc:
                log.warning("bot {}: frame ignored: {}", bot.self_id, exc)
            except Exception as exc:
                log.opt(exception=exc).error("bot {}: frame handling failed", bot.self_id)

    @classmethod
    @override
    def json_to_event(cls, json_data: Any) -> Event | None:
        if not isinstance(json_data, dict):
            return None
        if "post_type" not in json_data:
            cls._result_store.add_result(json_data)
            return None
        try:  # the model lookup itself indexes by the frame's values, which may be any type
            models = list(cls.get_event_model(json_data))
        except Exception:
            return None
        for model in models:
            try:
                return model.model_validate(json_data)
            except Exception:
                continue
        try:
            return Event.model_validate(json_data)
        except Exception:
            return None


def read_event_frame(data: str | bytes, self_id: str, *, now_s: int) -> Event | None:
    """One frame -> the event it carries; None for an API result (already handed over).

    Raises FrameError for a frame that is not a readable event of this bot; every other
    fault is repaired where it can be (see frames.py), with one warning line naming it.
    """
    text = _text(data)
    payload, flattened = _decode(text)
    if "post_type" not in payload:
        PallasOneBotAdapter._result_store.add_result(payload)  # matched by echo
        return None
    event_self_id = frame_self_id(payload)
    if event_self_id != self_id:
        raise FrameError(
            f"event for unknown bot id {excerpt(event_self_id, 40)!r} on the connection of "
            f"{self_id}: {excerpt(text)}"
        )
    clean = clean_event(payload, text=text, now_s=now_s)
    event = PallasOneBotAdapter.json_to_event(_with_message_built(clean.payload))
    if event is None:
        raise FrameError(f"unreadable event: {excerpt(text)}")
    repairs = (f"parts nested over {MAX_DEPTH} levels cut",) if flattened else ()
    repairs += clean.repairs
    if repairs:
        log.warning(
            "bot {}: malformed parts of event {} repaired ({}): {}",
            self_id,
            excerpt(str(payload.get("message_id", payload.get("post_type"))), 40),
            excerpt("; ".join(dict.fromkeys(repairs)), 200),
            excerpt(text),
        )
    return event


def _with_message_built(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload with its segment array already a `Message`, built as NoneBot's validator
    would build it. NoneBot validates each segment through a new pydantic TypeAdapter, which
    was about four fifths of the time of turning a frame into an event."""
    parts = payload.get("message")
    if not isinstance(parts, list) or not all(
        isinstance(part, dict) and "type" in part for part in parts
    ):
        return payload  # a CQ-code string or something odd: NoneBot's own path decides
    segments = (MessageSegment(type=part["type"], data=part.get("data", {})) for part in parts)
    return payload | {"message": Message(segments)}


def _is_result(data: str | bytes) -> bool:
    """Whether the frame is an API result (a JSON object without `post_type`)."""
    try:
        payload = _loads(data)
    except (ValueError, RecursionError):  # read in its turn, where such frames are repaired
        return False
    return isinstance(payload, dict) and "post_type" not in payload


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.opt(exception=exc).error("event handling failed: {!r}", exc)


def _text(data: str | bytes) -> str:
    if isinstance(data, bytes):
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise FrameError(f"binary frame that is not UTF-8 ({len(data)} bytes)") from None
    return data


def _loads(text: str | bytes) -> Any:
    """json.loads; an integer too long for int() (past 4,300 digits) is read as text the
    second time, so one absurd number costs a repair, not the frame. Well-formed frames
    take the fast path only."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise  # malformed: reading it again would not help
    except ValueError:  # an integer literal int() refuses
        return json.loads(text, parse_int=json_int)


def _decode(text: str) -> tuple[dict[str, Any], bool]:
    """The frame's JSON object, and whether parts too deep to decode had to be cut."""
    flattened = False
    try:
        payload = _loads(text)
    except ValueError:
        raise FrameError(f"malformed JSON: {excerpt(text)}") from None
    except RecursionError:
        payload, flattened = _decode_flattened(text), True
    if not isinstance(payload, dict):
        raise FrameError(f"JSON that is not an object: {excerpt(text)}")
    return payload, flattened


def _decode_flattened(text: str) -> Any:
    try:
        return _loads(flatten_deep_json(text))
    except (ValueError, RecursionError):
        raise FrameError(f"JSON nested too deep to read: {excerpt(text)}") from None
