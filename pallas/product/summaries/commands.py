"""Summaries from the chat (docs/summaries.md): /总结 [3小时|200条], /我错过了什么, and the
daily digest's switch /日报 for a group's owner and admins."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pallas.core.inbound import StreamKind
from pallas.product.conversation.commands import Audience, CommandCall
from pallas.product.summaries.requests import Request, SummaryRequests
from pallas.product.summaries.settings import SummaryKnobs
from pallas.product.summaries.window import read_window

_HOUR = re.compile(r"([0-9]{1,2})\s*(?:点|时|:00)?")
DIGEST_USAGE = "用法：/日报 开 [几点]、/日报 关、/日报 发群里、/日报 私聊管理员"


def request_of(call: CommandCall) -> Request:
    stored = call.stored
    return Request(stored.stream_id, stored.message_id - 1, stored.message_id,
                   str(stored.message_id),
                   stored.sender_person_id, stored.message.stream.self_id,
                   call.rank >= Audience.OWNER)  # fmt: skip


class SummaryCommand:
    name = "总结"
    summary = "总结最近的聊天：/总结、/总结 3小时、/总结 200条"

    def __init__(self, requests: SummaryRequests) -> None:
        self._requests = requests

    async def run(self, call: CommandCall) -> str:
        window = read_window(call.args)
        if isinstance(window, str):
            return window
        return await self._requests.summarize(request_of(call), window)


class MissedCommand:
    name = "我错过了什么"
    summary = "总结你上次在这说话之后大家聊了什么"

    def __init__(self, requests: SummaryRequests) -> None:
        self._requests = requests

    async def run(self, call: CommandCall) -> str:
        return await self._requests.missed(request_of(call))


def digest_words(knobs: SummaryKnobs) -> str:
    if not knobs.digest:
        return "日报没开。/日报 开 22点 就每天 22 点发当天的聊天总结。"
    to = "私聊发给群主和管理员" if knobs.digest_to == "admins" else "发在群里"
    return f"日报开着：每天 {knobs.digest_hour} 点{to}。"


def digest_change(args: str) -> Mapping[str, Any] | None:
    """The switch's words as settings changes; None when they are not understood."""
    words = args.split()
    if not words:
        return {}
    head, rest = words[0], words[1:]
    if head == "关" and not rest:
        return {"digest": False}
    if head == "开":
        if not rest:
            return {"digest": True}
        hour = _HOUR.fullmatch("".join(rest))
        if hour is None or int(hour[1]) > 23:
            return None
        return {"digest": True, "digest_hour": int(hour[1])}
    return {"发群里": {"digest_to": "group"}, "私聊管理员": {"digest_to": "admins"}}.get(head)


class DigestCommand:
    name = "日报"
    summary = "每天定时发当天的聊天总结：/日报 开 22点、/日报 关"

    def __init__(
        self,
        knobs: Callable[[str], Awaitable[SummaryKnobs]],
        change: Callable[[str, Mapping[str, Any]], Awaitable[None]],
    ) -> None:
        self._knobs = knobs
        self._change = change

    async def run(self, call: CommandCall) -> str:
        if call.stored.message.stream.kind != StreamKind.GROUP:
            return "日报是群里的，在群里用 /日报。"
        changes = digest_change(call.args)
        if changes is None:
            return DIGEST_USAGE
        scope = str(call.stored.stream_id)
        if changes:
            await self._change(scope, changes)
        return digest_words(await self._knobs(scope))
