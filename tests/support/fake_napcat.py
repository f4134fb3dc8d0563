"""A fake NapCat: a real WebSocket client speaking OneBot v11 (array message format).

It connects to the bot's reverse WebSocket endpoint the way NapCat does, sends events shaped
as NapCat sends them, and answers the bot's API calls by `echo`. Every call received is kept
in `api_calls`; an action without a responder is answered "ok" with no data (so pokes and
`set_msg_emoji_like` succeed). Actions named in `failing` are refused (retcode 1200, as
NapCat refuses), actions in `unanswered` get no answer at all (the bot's call times out).
`refusals` counts down: an action named there is refused that many more times, then answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import Callable
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection

Responder = Callable[[dict[str, Any]], Any]
_message_ids = itertools.count(1_000_001)


def next_message_id() -> int:
    return next(_message_ids)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "data": {"text": value}}


def at(user_id: int | str) -> dict[str, Any]:
    return {"type": "at", "data": {"qq": str(user_id)}}


def reply(message_id: int | str) -> dict[str, Any]:
    return {"type": "reply", "data": {"id": str(message_id)}}


def image(file: str = "abc.png", url: str = "https://example.invalid/abc.png") -> dict[str, Any]:
    return {"type": "image", "data": {"file": file, "url": url, "summary": "", "sub_type": 0}}


class FakeNapCat:
    def __init__(self, ws_url: str, self_id: int, access_token: str | None = None) -> None:
        self.ws_url = ws_url
        self.self_id = self_id
        self.access_token = access_token
        self.api_calls: list[dict[str, Any]] = []
        self.responders: dict[str, Responder] = {
            "get_login_info": lambda _p: {"user_id": self.self_id, "nickname": "bot"},
            "get_version_info": lambda _p: {
                "app_name": "NapCat.Onebot",
                "app_version": "4.x",
                "protocol_version": "v11",
            },
        }
        self.failing: set[str] = set()
        self.unanswered: set[str] = set()
        self.refusals: dict[str, int] = {}
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()

    async def connect(self, *, lifecycle: bool = True) -> FakeNapCat:
        headers = {"X-Self-ID": str(self.self_id), "X-Client-Role": "Universal"}
        if self.access_token:
            headers["Authorization"] = f"Bearer {self.access_token}"
        self._ws = await websockets.connect(self.ws_url, additional_headers=headers, max_size=None)
        self._reader = asyncio.create_task(self._read())
        if lifecycle:
            await self.send_event(
                {
                    "post_type": "meta_event",
                    "meta_event_type": "lifecycle",
                    "sub_type": "connect",
                    "status": {"online": True, "good": True},
                }
            )
        return self

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    @property
    def is_open(self) -> bool:
        return self._ws is not None and not self.closed.is_set()

    async def send_raw(self, frame: str | bytes) -> None:
        assert self._ws is not None
        await self._ws.send(frame)

    async def send_event(self, event: dict[str, Any]) -> dict[str, Any]:
        full = {"time": int(time.time()), "self_id": self.self_id, **event}
        await self.send_raw(json.dumps(full, ensure_ascii=False))
        return full

    # NapCat-shaped events -------------------------------------------------------------------

    def group_message(
        self,
        group_id: int,
        user_id: int,
        message: str | list[dict[str, Any]],
        *,
        message_id: int | None = None,
        nickname: str = "",
        card: str = "",
        post_type: str = "message",
        role: str = "member",
    ) -> dict[str, Any]:
        segments = [text(message)] if isinstance(message, str) else message
        return {
            "post_type": post_type,
            "message_type": "group",
            "sub_type": "normal",
            "message_id": message_id or next_message_id(),
            "group_id": group_id,
            "user_id": user_id,
            "message": segments,
            "message_format": "array",
            "raw_message": _raw(segments),
            "font": 14,
            "sender": {
                "user_id": user_id,
                "nickname": nickname or f"u{user_id}",
                "card": card,
                "role": role,
            },
        }

    def private_message(
        self,
        user_id: int,
        message: str | list[dict[str, Any]],
        *,
        message_id: int | None = None,
        nickname: str = "",
    ) -> dict[str, Any]:
        segments = [text(message)] if isinstance(message, str) else message
        return {
            "post_type": "message",
            "message_type": "private",
            "sub_type": "friend",
            "message_id": message_id or next_message_id(),
            "user_id": user_id,
            "target_id": self.self_id,
            "message": segments,
            "message_format": "array",
            "raw_message": _raw(segments),
            "font": 14,
            "sender": {"user_id": user_id, "nickname": nickname or f"u{user_id}", "card": ""},
        }

    def poke(self, group_id: int | None, user_id: int, target_id: int) -> dict[str, Any]:
        event = {
            "post_type": "notice",
            "notice_type": "notify",
            "sub_type": "poke",
            "user_id": user_id,
            "target_id": target_id,
        }
        if group_id is not None:
            event["group_id"] = group_id
        return event

    def group_recall(
        self, group_id: int, user_id: int, message_id: int, operator_id: int | None = None
    ) -> dict[str, Any]:
        return {
            "post_type": "notice",
            "notice_type": "group_recall",
            "group_id": group_id,
            "user_id": user_id,
            "operator_id": operator_id or user_id,
            "message_id": message_id,
        }

    def member_change(self, group_id: int, user_id: int, *, joined: bool) -> dict[str, Any]:
        return {
            "post_type": "notice",
            "notice_type": "group_increase" if joined else "group_decrease",
            "sub_type": "approve" if joined else "leave",
            "group_id": group_id,
            "user_id": user_id,
            "operator_id": 0,
        }

    # API side ------------------------------------------------------------------------------

    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for frame in self._ws:
                call = json.loads(frame)
                self.api_calls.append(call)
                await self._answer(call)
        except websockets.ConnectionClosed:
            pass
        finally:
            self.closed.set()

    def answer_sends(self) -> None:
        """Confirm every group and private send with a fresh message id, as NapCat does."""
        for action in ("send_group_msg", "send_private_msg"):
            self.responders[action] = lambda _params: {"message_id": next_message_id()}

    def calls_to(self, action: str) -> list[dict[str, Any]]:
        """The params of every call of `action` received so far, failed ones included."""
        return [c.get("params", {}) for c in self.api_calls if c.get("action") == action]

    async def _answer(self, call: dict[str, Any]) -> None:
        action = call.get("action", "")
        if action in self.unanswered:
            return
        responder = self.responders.get(action)
        if action in self.failing or self._refuse(action):
            result = {"status": "failed", "retcode": 1200, "data": None, "message": "refused"}
        elif responder is None:
            result = {"status": "ok", "retcode": 0, "data": None}
        else:
            result = {"status": "ok", "retcode": 0, "data": responder(call.get("params", {}))}
        result["echo"] = call.get("echo")
        assert self._ws is not None
        await self._ws.send(json.dumps(result))

    def _refuse(self, action: str) -> bool:
        left = self.refusals.get(action, 0)
        if left > 0:
            self.refusals[action] = left - 1
        return left > 0


def _raw(segments: list[dict[str, Any]]) -> str:
    return "".join(s.get("data", {}).get("text", f"[{s['type']}]") for s in segments)
