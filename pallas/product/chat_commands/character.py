"""`/人设`: the owner sees or edits the bot's character (name, description, style) for this
account; the core's, so it works whatever features run (docs/commands.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from pallas.product.conversation.commands import CommandCall
from pallas.store.character import CharacterStore, StoredCharacter

_FIELDS = {"名字": ("name", 20), "描述": ("description", 300), "风格": ("style", 300)}


class CharacterCommand:
    """`/人设` shows this account's character; `/人设 名字|描述|风格 <内容>` changes one part."""

    name = "人设"
    summary = "看或改我的人设：/人设 [名字|描述|风格 <内容>]"

    def __init__(
        self, store: CharacterStore, seed: StoredCharacter, clock: Callable[[], datetime]
    ) -> None:
        self._store = store
        self._seed = seed
        self._clock = clock

    async def run(self, call: CommandCall) -> str:
        self_id = call.stored.message.stream.self_id
        part, _, value = call.args.strip().partition(" ")
        if not part:
            shown = await self._store.character(self_id, self._seed, self._clock())
            return f"名字：{shown.name}\n描述：{shown.description}\n风格：{shown.style}"
        if part not in _FIELDS or not value.strip():
            return "用法：/人设 名字|描述|风格 <内容>"
        field, limit = _FIELDS[part]
        value = " ".join(value.split())
        if len(value) > limit:
            return f"{part}太长了，最多 {limit} 个字。"
        await self._store.edit(self_id, self._seed, field, value, self._clock())
        return f"好，{part}改好了，下一句话起生效。"
