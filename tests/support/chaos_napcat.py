"""QQ and NapCat for the chaos test (tests/e2e/test_chaos.py).

`QQ` keeps every group message that went out, also one whose sender never heard back, and
answers `get_msg` and `get_group_msg_history` from it. `ChaosNapCat` answers the bot's sends
with message ids, reports them back as `message_sent`, and can have the bot killed from inside
a send (before or after its echo) through a `CutHook`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Coroutine
from typing import Any, Protocol

from tests.support.fake_napcat import FakeNapCat
from tests.support.fixtures import ACCESS_TOKEN

SEND = "send_group_msg"


def text_of(params: dict[str, Any]) -> str:
    """The text of a send's `message` (a string, or the text segments of an array)."""
    message = params.get("message")
    if isinstance(message, str):
        return message
    return "".join(
        seg.get("data", {}).get("text", "")
        for seg in message or []
        if isinstance(seg, dict) and seg.get("type") == "text"
    )


class QQ:
    """QQ's own side: every group message that went out, whether or not its sender heard back."""

    def __init__(self) -> None:
        self.messages: dict[int, dict[str, Any]] = {}

    def record(self, event: dict[str, Any]) -> None:
        self.messages[int(event["message_id"])] = event

    def get_msg(self, params: dict[str, Any]) -> dict[str, Any] | None:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            return self.messages[int(params["message_id"])]
        return None

    def group_history(self, params: dict[str, Any]) -> dict[str, Any]:
        group_id = int(params.get("group_id", 0))
        before = int(params.get("message_seq") or 0)
        count = int(params.get("count") or 20)
        in_group = [
            m
            for m in self.messages.values()
            if m.get("group_id") == group_id and (not before or m["message_id"] <= before)
        ]
        return {"messages": in_group[-count:]}


class ChaosNapCat(FakeNapCat):
    """Answers sends with message ids, echoes them as `message_sent`, and can die inside one."""

    def __init__(self, ws_url: str, self_id: int, qq: QQ, rng: random.Random, cut: CutHook) -> None:
        super().__init__(ws_url, self_id, ACCESS_TOKEN)
        self.qq = qq
        self.rng = rng
        self.cut = cut
        self.cut_next_send = ""  # "before_echo" / "after_echo": the next send kills the bot
        self.responders["get_msg"] = qq.get_msg
        self.responders["get_group_msg_history"] = qq.group_history

    def sent_texts(self) -> list[str]:
        return [text_of(params) for params in self.calls_to(SEND)]

    async def _answer(self, call: dict[str, Any]) -> None:
        if call.get("action") != SEND:
            await super()._answer(call)
            return
        params = call.get("params", {})
        group_id = int(params.get("group_id", 0))
        segments = params.get("message") or []
        own = self.group_message(group_id, self.self_id, segments, post_type="message_sent")
        # NapCat stamps every message it reports (and keeps in its history) with its time.
        own.update(message_sent_type="self", target_id=group_id, time=int(time.time()))
        self.qq.record(own)  # from here on the message is in the group
        cut, self.cut_next_send = self.cut_next_send, ""
        if cut == "before_echo":  # NapCat took it; the bot dies before any report or answer
            self.cut(f"in a send, before its echo: {text_of(params)}")
            return
        if cut == "after_echo":  # NapCat reported it; the bot dies before the answer
            await self.send_event(own)
            await asyncio.sleep(self.rng.uniform(0.0, 0.05))
            self.cut(f"in a send, after its echo: {text_of(params)}")
            return
        answer = {
            "status": "ok",
            "retcode": 0,
            "data": {"message_id": own["message_id"]},
            "echo": call.get("echo"),
        }
        echo_first = self.rng.random() < 0.5  # NapCat's report may come before its answer
        if echo_first:
            await self.send_event(own)
        await self.send_raw(json.dumps(answer))
        if not echo_first:
            await self.send_event(own)


class Killer(Protocol):
    """The run, as a cut send sees it: kill the bot, restart it, run work in the background."""

    def kill(self, why: str) -> bool: ...

    def spawn(self, work: Coroutine[Any, Any, None]) -> None: ...

    async def restart(self) -> None: ...


class CutHook:
    """Called by NapCat from inside a send: kill the bot now, restart it in the background."""

    def __init__(self, chaos: Killer) -> None:
        self.chaos = chaos

    def __call__(self, why: str) -> None:
        if self.chaos.kill(why):
            self.chaos.spawn(self.chaos.restart())
