"""Memory's chat command: a member asks the bot to forget what it keeps about them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from pallas.product.conversation.commands import CommandCall
from pallas.product.memory.store import MemoryStore

FORGET_WINDOW = timedelta(minutes=1)


class ForgetMeCommand:
    name = "忘记我"
    summary = "让我忘掉记住的关于你的事（会先问你确认）"

    def __init__(self, store: MemoryStore, clock: Callable[[], datetime]) -> None:
        self._store, self._clock = store, clock
        self._asked: dict[int, datetime] = {}  # who asked, when: a minute to confirm

    async def run(self, call: CommandCall) -> str:
        person, now = call.stored.sender_person_id, self._clock()
        entries = await self._store.entries(person_id=person, limit=500)
        if not entries:
            return "我没记着关于你的事。"
        asked = self._asked.pop(person, None)
        if call.args != "确认" or asked is None or now - asked > FORGET_WINDOW:
            self._asked[person] = now
            while len(self._asked) > 1_000:
                self._asked.pop(next(iter(self._asked)))
            count = len(entries)
            return f"我记着关于你的 {count} 件事。确定要忘掉的话，一分钟内发「/忘记我 确认」。"
        for entry in entries:
            await self._store.forget(entry.id, now, actor=f"self:{person}")
        return f"好，关于你的 {len(entries)} 件事都忘掉了。"
