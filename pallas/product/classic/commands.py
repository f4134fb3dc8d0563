"""Learned lines from the chat (docs/commands.md, docs/classic.md): what the group taught and
what is banned, for its admins; opting out of being learned from, for everyone."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime

from pallas.core.inbound import StreamKind
from pallas.product.classic.learning import Learning
from pallas.product.classic.store import LearnedStore
from pallas.product.conversation.commands import Audience, CommandCall

GROUPS_ONLY = "这个命令要在群里用。"
_ID = re.compile(r"[0-9]{1,18}")


class LearnedCommand:
    name = "学说话"
    summary = "看这个群教会我的接话；/学说话 忘 <编号> 删掉一条"

    def __init__(self, store: LearnedStore, learning: Learning) -> None:
        self._store = store
        self._learning = learning  # told of a change: the stage asks the store again

    async def run(self, call: CommandCall) -> str:
        if call.stored.message.stream.kind is not StreamKind.GROUP:
            return GROUPS_ONLY
        words = call.args.split()
        sid = call.stored.stream_id
        if len(words) == 2 and words[0] in ("忘", "删") and _ID.fullmatch(words[1]):
            gone = await self._store.forget(int(words[1]), sid)
            self._learning.changed()
            return "删掉了，以后重新学。" if gone else f"这个群没有第 {words[1]} 条。"
        if words:
            return "用法：/学说话 看学会的；/学说话 忘 <编号> 删掉一条"
        pairs = await self._store.pairs(sid)
        if not pairs:
            return "这个群还没教会我什么。"
        lines = [f"#{p.id} {p.context} → {p.answer}（{p.count} 次，{p.answerers} 人）"
                 for p in pairs]  # fmt: skip
        return "这个群教会我的（最常见的在前）：\n" + "\n".join(lines)


class BansCommand:
    name = "禁句"
    summary = "看不许我再说的话；/禁句 解 <编号> 解禁一条"

    def __init__(self, store: LearnedStore, learning: Learning) -> None:
        self._store = store
        self._learning = learning

    async def run(self, call: CommandCall) -> str:
        if call.stored.message.stream.kind is not StreamKind.GROUP:
            return GROUPS_ONLY
        words = call.args.split()
        sid = call.stored.stream_id
        if len(words) == 2 and words[0] in ("解", "解禁") and _ID.fullmatch(words[1]):
            owner = call.rank >= Audience.OWNER
            lifted = await self._store.lift(int(words[1]), sid, owner=owner)
            self._learning.changed()
            return "解禁了。" if lifted else f"这里没有我能解的第 {words[1]} 条。"
        if words:
            return "用法：/禁句 看禁了哪些；/禁句 解 <编号> 解禁一条"
        bans = await self._store.bans(sid)
        if not bans:
            return "这个群没有禁句。回复我学来的话「不可以」就能禁掉它。"
        return "不许我再说的：\n" + "\n".join(
            f"#{b.id} {b.context} → {b.answer}{'（各群都禁）' if b.everywhere else ''}"
            for b in bans
        )


class OptOutCommand:
    name = "别学我"
    summary = "不再从你说的话里学接话；/别学我 取消 恢复"

    def __init__(self, store: LearnedStore, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock

    async def run(self, call: CommandCall) -> str:
        back = call.args.strip() in ("取消", "恢复")
        await self._store.set_opt_out(call.stored.sender_person_id, not back, self._clock())
        return "好，又可以从你这儿学了。" if back else "好，不再学你说的话了。"
