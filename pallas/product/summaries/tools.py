"""The model's summary tool, `chat.summarize` (docs/summaries.md): for "总结一下刚才聊了啥"
and "我错过了什么". Deferred: brought in by the words (总结, 错过, 聊了啥…) or `tools.find`.

The summary is made off the turn, by the same job as /总结, and said in the chat by
itself; the tool tells the model so, and the model need not repeat it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pallas.product.llm.tools.base import (
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolSpec,
    ToolTag,
    Visibility,
)
from pallas.product.summaries.requests import Request, SummaryRequests
from pallas.product.summaries.window import MAX_HOURS, MAX_LINES, Window
from pallas.store.conversation import last_said_by
from pallas.store.identities import person_ids

HINTS = ("总结", "错过", "聊了啥", "聊了什么", "说了啥", "说了什么", "发生了什么", "爬楼",
         "概括", "回顾", "复盘")  # fmt: skip


class SummarizeTool(Tool):
    spec = ToolSpec(
        name="chat.summarize",
        description="总结这个会话最近的聊天，总结稍后由系统直接发到会话里（你不用复述）。"
        "hours：最近几小时；lines：最近几条；since_asker_last_spoke=true：提问的人上次说话"
        "之后的（“我错过了什么”）。都不给就是最近 200 条。",
        parameters={
            "type": "object",
            "properties": {
                "hours": {"type": "number", "description": "最近几小时（最多 72）"},
                "lines": {"type": "integer", "description": "最近几条（最多 1500）"},
                "since_asker_last_spoke": {"type": "boolean"},
            },
        },
        tags=frozenset({ToolTag.SIDE_EFFECT}),
        domains=("summaries",),
        hints=HINTS,
        visibility=Visibility.DEFERRED,
    )

    def __init__(self, requests: SummaryRequests) -> None:
        self._requests = requests

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        request = await self._request(context)
        if arguments.get("since_asker_last_spoke") is True:
            refused = await self._requests.missed(request)
        else:
            refused = await self._requests.summarize(request, window_of(arguments))
        if refused:
            raise ToolError(refused)
        return ToolOutput({"queued": True, "note": "总结稍后会单独发出，不用复述，也可以不回复。"})

    async def _request(self, context: ToolContext) -> Request:
        conversation = context.conversation
        users = [u for u in context.asker_user_ids if u]
        found = await person_ids(context.engine, conversation.stream.platform, users[-1:])
        if not users or users[-1] not in found:
            raise ToolError("不知道是谁要总结")
        person = found[users[-1]]
        question = await last_said_by(context.engine, conversation.stream_id, person,
                                      context.watermark + 1)  # fmt: skip
        return Request(conversation.stream_id, context.watermark,
                       question or context.watermark + 1, f"t{context.turn_id}", person,
                       conversation.stream.self_id, conversation.asker_is_owner)  # fmt: skip


def window_of(arguments: Mapping[str, Any]) -> Window:
    """The model's numbers, held to the command's bounds."""
    hours, lines = arguments.get("hours"), arguments.get("lines")
    if isinstance(hours, int | float) and not isinstance(hours, bool) and hours > 0:
        return Window(hours=min(float(hours), MAX_HOURS), lines=MAX_LINES)
    if isinstance(lines, int) and not isinstance(lines, bool) and lines > 0:
        return Window(hours=MAX_HOURS, lines=min(lines, MAX_LINES))
    return Window()
