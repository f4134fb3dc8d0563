"""The owner's persona commands, from any chat with the bot:

/解除拉黑 <群号> <QQ>   forgive: off the blacklist, the silence and the anger gone
/拉黑 <群号> <QQ>       ignore someone in that group until lifted
/好感 <QQ>              the score, its tier and the notes the bot keeps about them
/备注 <QQ> <内容>       teach a relation note ("是群主的弟弟", "叫他阿明")
/承诺 [取消 <编号>]     the promises the bot made to owners in this account; take one back
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKind
from pallas.core.local_time import SHANGHAI
from pallas.product.conversation.commands import CommandCall
from pallas.product.persona.favor import tier_of
from pallas.product.persona.notes import acceptable
from pallas.product.persona.notify import PRIVATE_CHAT
from pallas.product.persona.promise_store import PromiseState, PromiseStore
from pallas.product.persona.store import PersonaStore, person_of
from pallas.store.conversation import chat_of
from pallas.store.members import known_in_stream


class _PersonaCommand:
    def __init__(
        self, engine: AsyncEngine, store: PersonaStore, clock: Callable[[], datetime]
    ) -> None:
        self._engine = engine
        self._store = store
        self._clock = clock

    async def _who(self, call: CommandCall, where: str, user: str) -> tuple[int, int] | str:
        """(chat, person) for `<群号|私聊> <QQ>`, or why not."""
        stream = call.stored.message.stream
        private = where == PRIVATE_CHAT
        kind, external = ("private", user) if private else ("group", where)
        stream_id = await chat_of(self._engine, stream.platform, stream.self_id, kind, external)
        if stream_id is None:
            return "我和TA没私聊过。" if private else f"我不在群 {where} 里，或者那里还没人说过话。"
        person_id = await person_of(self._engine, stream.platform, user)
        if person_id is None:
            return f"没见过 {user} 这个人。"
        return stream_id, person_id


class LiftCommand(_PersonaCommand):
    name = "解除拉黑"
    summary = "原谅某人：/解除拉黑 <群号|私聊> <QQ>"

    async def run(self, call: CommandCall) -> str:
        words = call.args.split()
        if len(words) != 2:
            return "用法：/解除拉黑 <群号|私聊> <QQ>"
        who = await self._who(call, *words)
        if isinstance(who, str):
            return who
        lifted = await self._store.lift(*who, self._clock())
        return "好，不生TA的气了。" if lifted else "TA本来就没被拉黑。"


class BlacklistCommand(_PersonaCommand):
    name = "拉黑"
    summary = "在某个群（或私聊）里不再理某人：/拉黑 <群号|私聊> <QQ>"

    async def run(self, call: CommandCall) -> str:
        words = call.args.split()
        if len(words) != 2:
            return "用法：/拉黑 <群号|私聊> <QQ>"
        who = await self._who(call, *words)
        if isinstance(who, str):
            return who
        await self._store.blacklist(*who, "号主拉黑", self._clock())
        where = "私聊里" if words[0] == PRIVATE_CHAT else f"在群 {words[0]} 里"
        return f"好，{where}不理 {words[1]} 了。"


class FavorCommand(_PersonaCommand):
    name = "好感"
    summary = "看我对某人的好感和备注：/好感 <QQ>"

    async def run(self, call: CommandCall) -> str:
        user = call.args.strip()
        stream = call.stored.message.stream
        person_id = await person_of(self._engine, stream.platform, user) if user else None
        if person_id is None:
            return "用法：/好感 <QQ>（要是我见过的人）"
        in_group = stream.kind is StreamKind.GROUP
        if in_group and not await known_in_stream(self._engine, call.stored.stream_id, person_id):
            # What the bot knows of someone never reaches a chat they are not in.
            return "TA 不在这个群里：私聊我再看。"
        score, _ = await self._store.favorability(stream.self_id, person_id)
        notes = await self._store.notes(stream.self_id, [person_id])
        lines = [f"{user}：好感 {score:.0f}（{tier_of(score).value}）"]
        lines += [f"#{note.id} {note.text}（{_SOURCES[note.source]}）" for note in notes]
        return "\n".join(lines)


class NoteCommand(_PersonaCommand):
    name = "备注"
    summary = "教我一条关于某人的备注：/备注 <QQ> <内容>"

    async def run(self, call: CommandCall) -> str:
        user, _, text = call.args.strip().partition(" ")
        text = " ".join(text.split())
        stream = call.stored.message.stream
        person_id = await person_of(self._engine, stream.platform, user) if user else None
        if person_id is None or not text:
            return "用法：/备注 <QQ> <内容>（要是我见过的人）"
        if not acceptable(text) or len(text) > 60:
            return "这条备注我不记：要短，而且不能骂人。"
        added = await self._store.add_note(stream.self_id, person_id, text, "owner", self._clock())
        return "记下了。" if added else "这条已经记着了。"


_SOURCES = {"owner": "你教的", "observed": "TA自己说的", "extracted": "从TA的话里记下的"}


_PROMISE_STATES = {
    PromiseState.OPEN: "待办",
    PromiseState.KEPT: "已做",
    PromiseState.DROPPED: "已取消",
    PromiseState.EXPIRED: "已过期",
}


class PromiseCommand:
    name = "承诺"
    summary = "看我答应过主人的事：/承诺；收回一件：/承诺 取消 <编号>"

    def __init__(self, store: PromiseStore, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock

    async def run(self, call: CommandCall) -> str:
        words = call.args.split()
        if not words:
            return await self._list(call.stored.message.stream.self_id)
        if len(words) == 2 and words[0] == "取消" and words[1].isdigit():
            return await self._drop(call.stored.message.stream.self_id, int(words[1]))
        return "用法：/承诺，或 /承诺 取消 <编号>"

    async def _list(self, self_id: str) -> str:
        promises = await self._store.of_account(self_id, limit=10)
        if not promises:
            return "我还没答应过什么事。"
        lines = []
        for p in promises:
            when = p.due_at.astimezone(SHANGHAI).strftime("%m-%d %H:%M") if p.due_at else "没定时间"
            lines.append(f"#{p.id} [{_PROMISE_STATES[p.state]}] {p.text}（{when}）")
        return "\n".join(lines)

    async def _drop(self, self_id: str, promise_id: int) -> str:
        promise = await self._store.get(promise_id)
        if promise is None or promise.self_id != self_id:
            return f"没有 #{promise_id} 这件事。"
        if not await self._store.close(promise_id, PromiseState.DROPPED, self._clock()):
            return f"#{promise_id} 已经{_PROMISE_STATES[promise.state]}了。"
        return f"好，#{promise_id} 不做了。"
