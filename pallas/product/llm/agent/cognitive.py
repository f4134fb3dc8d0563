"""The cognitive tools: looking things up before deciding. They never end a turn."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.llm.agent.actions import Action, CognitiveCall
from pallas.product.llm.assembler.context import PreparedTurn
from pallas.store.conversation import WindowLine, around, search_before

RECALL_LIMIT = 5
INSPECT_SPAN = 2
SHOWN_CHARS = 300


class CognitiveTools:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def run(self, call: CognitiveCall, turn: PreparedTurn) -> Any:
        """The observation, as plain data. A store failure propagates: it is our fault, not
        the model's, and must not be mistaken for a provider hiccup."""
        if call.action is Action.RECALL:
            return await self._recall(str(call.arguments["query"]), turn)
        return await self._inspect(int(call.arguments["message_id"]), turn)

    async def _recall(self, query: str, turn: PreparedTurn) -> Any:
        words = [word for word in query.split() if word][:5]
        oldest_shown = min((line.message_id for line in turn.lines), default=turn.watermark + 1)
        found = await search_before(self._engine, turn.stream_id, oldest_shown, words, RECALL_LIMIT)
        if not found:
            return {"找到": 0, "提示": "更早的记录里没有找到"}
        return {"找到": len(found), "消息": [_shown(line) for line in reversed(found)]}

    async def _inspect(self, message_id: int, turn: PreparedTurn) -> Any:
        if message_id > turn.watermark:
            return {"错误": f"#{message_id} 还不能看"}
        lines = await around(self._engine, turn.stream_id, message_id, turn.watermark, INSPECT_SPAN)
        if not lines:
            return {"错误": f"这个会话里没有 #{message_id}"}
        return {"消息": [_shown(line) for line in lines]}


def _shown(line: WindowLine) -> dict[str, Any]:
    text = "(已撤回)" if line.recalled else line.text[:SHOWN_CHARS]
    return {
        "id": line.message_id,
        "时间": line.time.astimezone().strftime("%m-%d %H:%M"),
        "发言人": line.speaker or f"用户{line.user_id[-4:]}",
        "内容": text,
    }
