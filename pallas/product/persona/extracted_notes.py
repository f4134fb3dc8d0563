"""Relation notes from the extraction call (docs/persona.md): the call that runs after turns
anyway is offered `relation.note` beside `memory.remember`; each proposal names the message
it comes from, and `notes.admit_extracted` keeps only what that message's writer stated about
themselves. A refusal costs a log line; the note is never kept."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.llm.tools.registry import to_wire
from pallas.product.persona.notes import admit_extracted
from pallas.product.persona.store import PersonaStore
from pallas.providers.results import ToolCall
from pallas.store.conversation import WindowLine, stream_info

NOTE_TOOL = "relation.note"
EXTRACTED = "extracted"


class RelationNoteTool:
    name = NOTE_TOOL
    instruction = (
        "- relation.note：某人在消息里亲口说的、关于自己的稳定事实（身份、希望怎么被称呼、"
        "偏好、和谁是什么关系），写成一句不带主语的短语，比如“喜欢吃辣”“是小红的哥哥”。"
        "不写猜测，不评价性格。"
    )

    def __init__(self, engine: AsyncEngine, store: PersonaStore) -> None:
        self._engine = engine
        self._store = store

    def spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": to_wire(NOTE_TOOL),
                "description": "给某人记一条关系备注（只记TA自己在这条消息里说的）。"
                "没有就不要调用。",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "message_id": {"type": "integer", "description": "出自哪条消息"},
                        "about_user_id": {"type": "string", "description": "关于谁（用户 id）"},
                        "text": {"type": "string", "description": "一句短语，40 字以内"},
                    },
                    "required": ["message_id", "about_user_id", "text"],
                },
            },
        }

    async def take(
        self, call: ToolCall, lines: Sequence[WindowLine], stream_id: int, now: datetime
    ) -> bool:
        args = call.arguments or {}
        source = next((ln for ln in lines if ln.message_id == args.get("message_id")), None)
        text = args.get("text")
        if source is None or not isinstance(text, str) or source.from_bot:
            logger.info("persona: extracted note left out (no shown line): {}", call.raw_arguments)
            return False
        about = args.get("about_user_id")
        about_id = None if about is None else str(about)
        refusal = admit_extracted(text, source.text, source.user_id, about_id)
        if refusal is not None:
            logger.info("persona: extracted note refused ({}): {!r}", refusal.value, text[:80])
            return False
        info = await stream_info(self._engine, stream_id)
        if info is None:
            return False
        # Filed under the account that was talking (a group may have several: the latest of
        # the bot's lines shown says which), else the chat's own.
        account = next((ln.user_id for ln in reversed(lines) if ln.from_bot and ln.user_id),
                       info.self_id)  # fmt: skip
        return await self._store.add_note(
            account, source.sender_person_id, text.strip(), EXTRACTED, now
        )
