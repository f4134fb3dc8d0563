"""Built-in tools that need nothing outside the bot: discovery, the time, the chat's past."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from zoneinfo import ZoneInfo

from pallas.product.llm.tools.base import (
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolSpec,
    ToolTag,
    Visibility,
)
from pallas.product.llm.tools.book import ToolBook
from pallas.product.llm.tools.registry import to_wire
from pallas.store.conversation import WindowLine, around, search_before, window_up_to

SHANGHAI = ZoneInfo("Asia/Shanghai")
SHOWN_CHARS = 300
FIND_LIMIT = 8
_WEEKDAYS = "一二三四五六日"


class FindToolsTool(Tool):
    """`tools.find`: look through the tools not offered this turn, and bring them in."""

    spec = ToolSpec(
        name="tools.find",
        description="查找当前没有直接提供的功能（按关键词）；找到的功能在这个会话里会暂时可用。"
        "被问到“你会什么”时，也用它看看自己真有哪些功能。",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "想做的事，几个关键词"}},
        },
        tags=frozenset({ToolTag.READ_ONLY}),
        essential=True,
        timeout_s=5.0,
    )

    def __init__(self, book: ToolBook) -> None:
        self._book = book

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        query = str(arguments.get("query") or "").strip()
        snapshot = await self._book.snapshot()
        found = []
        for candidate in self._book.candidates(snapshot, context.conversation):
            spec = candidate.spec
            score = _score(spec, query)
            if spec.name == self.spec.name or score == 0:
                continue
            entry = {"功能": spec.name, "说明": spec.description}
            if not candidate.availability.available:
                entry["状态"] = f"不可用：{candidate.availability.reason}"
            elif candidate.rare:
                entry["用法"] = f'call(name="{spec.name}", arguments={{...}})'
            else:
                entry["用法"] = f"直接调用 {to_wire(spec.name)}"
            found.append((score, candidate, entry))
        found.sort(key=lambda item: -item[0])  # stable: registry order among equals
        found = [(candidate, entry) for _, candidate, entry in found]
        found = found[:FIND_LIMIT]
        activated = tuple(
            c.spec.name
            for c, _ in found
            if c.availability.available and not c.rare and c.spec.visibility is Visibility.DEFERRED
        )
        if not found:
            return ToolOutput({"找到": [], "提示": "没有相关功能"})
        return ToolOutput({"找到": [entry for _, entry in found]}, activated=activated)


def _score(spec: ToolSpec, query: str) -> int:
    """How well a tool matches: a word in its name or hints counts double. 0: no match."""
    if not query:
        return 1
    named = " ".join((spec.name, *spec.hints)).lower()
    described = spec.description.lower()
    words = [w for w in re.split(r"[\s,，、]+", query.lower()) if w]
    # Chinese has no spaces: every two-character piece of the query is a word too.
    words += [query[i : i + 2] for i in range(len(query) - 1) if " " not in query[i : i + 2]]
    return sum(2 if w in named else 1 if w in described else 0 for w in words)


class TimeNowTool(Tool):
    spec = ToolSpec(
        name="time.now",
        description="现在的日期、星期和时间（北京时间）。",
        parameters={"type": "object", "properties": {}},
        tags=frozenset({ToolTag.READ_ONLY}),
        domains=("time",),
        timeout_s=2.0,
    )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        local = context.now.astimezone(SHANGHAI)
        return ToolOutput(
            {
                "日期": local.strftime("%Y-%m-%d"),
                "星期": f"星期{_WEEKDAYS[local.weekday()]}",
                "时间": local.strftime("%H:%M"),
            }
        )


class ChatHistoryTool(Tool):
    """`chat.history`: older messages of this conversation, newest first, by keyword or not."""

    spec = ToolSpec(
        name="chat.history",
        description="查这个会话更早的聊天记录：给 query 按关键词找，不给就看更早的几条。",
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "关键词，空格分隔"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 10},
            },
        },
        tags=frozenset({ToolTag.READ_ONLY}),
        domains=("general",),
        timeout_s=5.0,
    )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        limit = int(arguments.get("limit") or 5)
        words = [w for w in str(arguments.get("query") or "").split() if w][:5]
        before = min(context.visible_message_ids, default=context.watermark + 1)
        stream_id = context.conversation.stream_id
        if words:
            lines = await search_before(context.engine, stream_id, before, words, limit)
        else:
            lines = list(reversed(await window_up_to(context.engine, stream_id, before - 1, limit)))
        if not lines:
            return ToolOutput({"找到": 0, "提示": "更早的记录里没有找到"})
        return ToolOutput({"找到": len(lines), "消息": [shown(line) for line in reversed(lines)]})


class ChatMessageTool(Tool):
    """`chat.message`: one message of this conversation with its neighbours."""

    spec = ToolSpec(
        name="chat.message",
        description="看这个会话里的一条消息和它前后各两条。",
        parameters={
            "type": "object",
            "properties": {"message_id": {"type": "integer", "description": "消息编号"}},
            "required": ["message_id"],
        },
        tags=frozenset({ToolTag.READ_ONLY}),
        domains=("general",),
        timeout_s=5.0,
    )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        message_id = int(arguments["message_id"])
        if message_id > context.watermark:
            raise ToolError(f"#{message_id} 还不能看")
        lines = await around(
            context.engine, context.conversation.stream_id, message_id, context.watermark, 2
        )
        if not lines:
            raise ToolError(f"这个会话里没有 #{message_id}")
        return ToolOutput({"消息": [shown(line) for line in lines]})


def shown(line: WindowLine) -> dict[str, Any]:
    text = "(已撤回)" if line.recalled else line.text[:SHOWN_CHARS]
    return {
        "id": line.message_id,
        "时间": line.time.astimezone(SHANGHAI).strftime("%m-%d %H:%M"),
        "发言人": line.speaker or f"用户{line.user_id[-4:]}",
        "内容": text,
    }
