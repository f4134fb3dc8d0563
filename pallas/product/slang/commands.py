"""/黑话 in a group (docs/slang.md): everyone sees what the bot learned of the group's words
and which it is still listening to; the group's owner, its admins and the bot's owners add,
correct and delete meanings.

  /黑话                 the learned terms, and the ones being listened to
  /黑话 嗯哼酱          one term: its meaning, when and from how many lines it was learned
  /黑话 嗯哼酱=群主家的猫  add or correct (admins)
  /黑话 删 嗯哼酱        delete for good: it is not learned again (admins)
  /黑话 样子            the samples of how the group answers
"""

from __future__ import annotations

import re
from datetime import datetime

from pallas.core.clock import utc_now
from pallas.core.inbound import StreamKind
from pallas.product.conversation.commands import Audience, CommandCall
from pallas.product.slang.reference import simplified
from pallas.product.slang.rules import MAX_TERM_CHARS, meaning_refusal
from pallas.product.slang.store import ADMIN, DELETED, SlangStore, Term

LISTED = 20
LISTENING = 5
USAGE = "用法：/黑话、/黑话 词、/黑话 词=意思、/黑话 删 词、/黑话 样子"


def ago(then: datetime | None, now: datetime) -> str:
    if then is None:
        return ""
    days = (now - then).days
    return "今天" if days < 1 else f"{days} 天前"


def term_words(term: Term, now: datetime) -> str:
    if term.source == DELETED:
        return f"「{term.term}」被管理员删掉了，不会再学。"
    if term.meaning is None:
        heard = f"{term.lines} 条消息，{term.members} 个人说过"
        return f"「{term.term}」还在留意（{heard}），还没学会。"
    how = "管理员教的" if term.source == ADMIN else f"从 {len(term.learned_from)} 条消息里学到的"
    return f"「{term.term}」：{term.meaning}（{ago(term.learned_at, now)}{how}）"


def listing(terms: list[Term]) -> str:
    meant = [t for t in terms if t.meaning and t.source != DELETED]
    listening = sorted((t for t in terms if t.source == "" and t.meaning is None),
                       key=lambda t: (-t.members, -t.lines))[:LISTENING]  # fmt: skip
    if not meant and not listening:
        return "还没学到这个群的黑话。同一个说法有几个人说上几次，我就会留意。"
    lines = [f"这个群的说法（{len(meant)} 个）："] if meant else ["还没学会这个群的说法。"]
    lines += [f"{t.term}：{t.meaning}" for t in meant[:LISTED]]
    if len(meant) > LISTED:
        lines.append(f"……还有 {len(meant) - LISTED} 个，在控制台「群里的说法」里看全部")
    if listening:
        lines.append("还在留意：" + "、".join(t.term for t in listening))
    return "\n".join(lines)


_EDIT = re.compile(r"[=＝：:]")


def parse_edit(args: str) -> tuple[str, str] | None:
    """`词=意思` (or `词：意思`; the first mark splits) -> (term, meaning)."""
    mark = _EDIT.search(args)
    if mark is None:
        return None
    term, meaning = args[: mark.start()], args[mark.end() :]
    return simplified(term[:64]).strip().lower(), meaning.strip()


class SlangCommand:
    name = "黑话"
    summary = "看我学到的这个群的说法；群主和管理员可以教、改、删：/黑话 词=意思"

    def __init__(self, store: SlangStore) -> None:
        self._store = store

    async def run(self, call: CommandCall) -> str:
        if call.stored.message.stream.kind != StreamKind.GROUP:
            return "黑话是群里的，在群里用 /黑话。"
        stream_id, args, now = call.stored.stream_id, call.args.strip(), utc_now()
        if not args:
            return listing(await self._store.terms(stream_id))
        if args in ("样子", "样本"):
            return await self._samples(stream_id)
        edit = parse_edit(args)
        deleting = args.startswith("删 ") or args.startswith("删除 ")
        if (edit or deleting) and call.rank < Audience.ADMIN:
            return "教、改、删黑话要群主或管理员来。"
        if deleting:
            term = simplified(args.split(None, 1)[1]).strip().lower()
            gone = await self._store.delete(stream_id, term, _by(call))
            return f"删掉了「{term}」，以后不会再学。" if gone else f"没有「{term}」这个词。"
        if edit is not None:
            return await self._teach(stream_id, *edit, by=_by(call), now=now)
        term = await self._store.term(stream_id, simplified(args).lower())
        return term_words(term, now) if term else f"还不知道「{args}」在这个群里是什么意思。"

    async def _teach(self, stream_id: int, term: str, meaning: str, by: str,
                     now: datetime) -> str:  # fmt: skip
        if not term or len(term) > MAX_TERM_CHARS or re.search(r"[0-9]{5,}", term):
            return f"词要 1 到 {MAX_TERM_CHARS} 个字，不能是号码。"
        refusal = meaning_refusal(term, meaning, now)
        if refusal is not None:
            return "这个意思我不记：不能空着、太长（60 字以内），也不能骂人或说别人的隐私。"
        await self._store.set_meaning(stream_id, term, meaning, by, now)
        return f"记住了：「{term}」在这个群里是“{meaning}”。"

    async def _samples(self, stream_id: int) -> str:
        kept = await self._store.samples(stream_id, 10)
        if not kept:
            return "还没记下大家接话的样子。"
        return "大家平时这样接话：\n" + "\n".join(f"「{s.text}」" for s in kept)


def _by(call: CommandCall) -> str:
    return f"qq:{call.stored.message.sender.user_id}"[:64]
