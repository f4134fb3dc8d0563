"""The agent's memory tools: look memories up, see what is kept about a person, correct or
forget an entry when someone says "你记错了" or "忘掉……".

Only what this chat may see is reachable: search and profiles read the chat's own entries and,
with the person's consent, their facts from other chats; corrections and forgetting touch only
the chat's own active entries. Who may change what is decided by the pure `may_change`
(permissions.py) from the entry, the askers and their rank (member, admin, the bot's owner).
Refusals are `ToolError`s with a short Chinese reason the model relays.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.llm.tools.base import (
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolSpec,
    ToolTag,
    Visibility,
)
from pallas.product.memory.permissions import Change, Rank, is_group_level, may_change, rank_of
from pallas.product.memory.recall_reads import RecallScope, keyword_recall
from pallas.product.memory.store import MemoryKind, MemoryRecord, MemoryStatus, MemoryStore
from pallas.product.memory.teachers import chat_people
from pallas.product.teaching.guard import REFUSAL_TEXT, Refusal, Teaching, judge_teaching
from pallas.store.identities import person_ids
from pallas.store.members import known_in_stream
from pallas.store.models import Identity, Member

SHANGHAI = ZoneInfo("Asia/Shanghai")
SEARCH_LIMIT = 10
PROFILE_LIMIT = 20
GROUP = "群"
SEARCH_KINDS = (MemoryKind.FACT, MemoryKind.EPISODE, MemoryKind.BEHAVIOR)
# The guard's content rules; who may teach what is decided here, not by the guard.
CONTENT_REFUSALS = frozenset(
    {
        Refusal.EMPTY,
        Refusal.TOO_LONG,
        Refusal.INJECTION,
        Refusal.VULGAR,
        Refusal.BELITTLING,
        Refusal.SENSITIVE,
        Refusal.ABOUT_PEOPLE,
        Refusal.ABOUT_ANOTHER_PERSON,  # owners pass for a person's fact, not a group one
    }
)
DOMAIN = "memory"
# What people say when memory is in question; the search comes with the correcting and
# forgetting words too, since an entry is corrected or forgotten by its id.
RECALL_HINTS = ("记得", "记住", "记不记得", "你还记得", "还记得吗", "记性")
CORRECT_HINTS = ("记错", "不是这样", "不是我", "搞错了", "弄错了", "更正")
FORGET_HINTS = ("忘掉", "忘了", "忘记", "别记", "不要记", "删掉")
SHARE_HINTS = ("别的群", "其他群", "跨群", "都可以说", "可以告诉别人", "别告诉别人", "别在别的群")
PROFILE_HINTS = ("记得我", "关于我", "你知道我", "了解我", "记了我什么", "你记得他", "你记得她")


# -- the chat, as the tools see it ---------------------------------------------------------


@dataclass(frozen=True)
class _Chat:
    engine: AsyncEngine
    stream_id: int
    platform: str
    askers: frozenset[int]
    rank: Rank
    asker_user_ids: tuple[str, ...] = ()

    async def person_id(self, user_id: str) -> int:
        found = await person_ids(self.engine, self.platform, [user_id])
        if user_id not in found:
            raise ToolError(f"不认识用户 {user_id}")
        return found[user_id]

    async def person_here(self, user_id: str, unknown: str) -> int:
        """Someone of this chat (a member, or who has spoken in it). Anyone else gets the
        answer an unknown id gets: what the bot knows of a person never reaches a chat they
        are not in, not even that it knows them (docs/memory.md, "Who sees what")."""
        found = await person_ids(self.engine, self.platform, [user_id])
        person_id = found.get(user_id)
        if person_id is None or not await known_in_stream(self.engine, self.stream_id, person_id):
            raise ToolError(unknown)
        return person_id

    async def names(self, ids: Iterable[int | None]) -> dict[int, str]:
        return await names_here(self.engine, self.stream_id, self.platform, ids)

    async def about(self, entry: MemoryRecord) -> str:
        return named(await self.names([entry.person_id]), entry.person_id)

    async def visible_entry(self, store: MemoryStore, entry_id: int) -> MemoryRecord:
        entry = await store.get(entry_id)
        # Another chat's entry gets the same answer as a missing one: its existence is private.
        if (
            entry is None
            or entry.status is not MemoryStatus.ACTIVE
            or entry.stream_id != self.stream_id
        ):
            raise ToolError(f"这个会话里没有第 {entry_id} 条记忆")
        return entry


async def _chat(context: ToolContext) -> _Chat:
    platform = context.conversation.stream.platform
    found = await person_ids(context.engine, platform, context.asker_user_ids)
    askers = frozenset(found.values())
    stream_id = context.conversation.stream_id
    roles = await roles_here(context.engine, stream_id, askers)
    rank = rank_of(roles, context.conversation.asker_is_owner)
    users = tuple(context.asker_user_ids)
    return _Chat(context.engine, stream_id, platform, askers, rank, users)


async def roles_here(engine: AsyncEngine, stream_id: int, people: Collection[int]) -> list[str]:
    """Each asker's group role here (owner / admin / member; "" when unknown): a rank is
    only as high as the lowest asker's, so a member does not borrow an admin's."""
    query = select(Member.person_id, Member.role).where(
        Member.stream_id == stream_id, Member.person_id.in_(list(people))
    )
    async with engine.connect() as conn:
        known = {int(row.person_id): str(row.role or "") for row in await conn.execute(query)}
    return [known.get(person, "") for person in people]


async def names_here(
    engine: AsyncEngine, stream_id: int, platform: str, ids: Iterable[int | None]
) -> dict[int, str]:
    """Person id -> the name this chat knows them by: the group card, else the nickname, else
    "用户" and the last four digits of their id."""
    wanted = {i for i in ids if i is not None}
    if not wanted:
        return {}
    query = (
        select(Identity.person_id, Identity.user_id, Identity.nickname, Member.card)
        .outerjoin(
            Member, and_(Member.stream_id == stream_id, Member.person_id == Identity.person_id)
        )
        .where(Identity.platform == platform, Identity.person_id.in_(wanted))
        .order_by(Identity.id)
    )
    names: dict[int, str] = {}
    async with engine.connect() as conn:
        for row in await conn.execute(query):
            names.setdefault(
                int(row.person_id), row.card or row.nickname or f"用户{row.user_id[-4:]}"
            )
    return {i: names.get(i, "用户") for i in wanted}


def named(names: Mapping[int, str], person_id: int | None) -> str:
    return GROUP if person_id is None else names[person_id]


def shown(entry: MemoryRecord, about: str) -> dict[str, Any]:
    return {
        "id": entry.id,
        "about": about,
        "kind": entry.kind.value,
        "text": entry.text,
        "learned_at": entry.created_at.astimezone(SHANGHAI).strftime("%Y-%m-%d"),
    }


# -- the tools -----------------------------------------------------------------------------


def memory_spec(
    *,
    name: str,
    description: str,
    parameters: Mapping[str, Any],
    tags: frozenset[ToolTag],
    hints: tuple[str, ...],
) -> ToolSpec:
    """The memory tools' common shape: the memory domain, brought in by what people say."""
    return ToolSpec(
        name=name,
        description=description,
        parameters=parameters,
        tags=tags,
        domains=(DOMAIN,),
        hints=hints,
        visibility=Visibility.DEFERRED,
        timeout_s=5.0,
    )


class _MemoryTool(Tool):
    def __init__(self, store: MemoryStore) -> None:
        self._store = store


class MemorySearchTool(_MemoryTool):
    """`memory.search`: what the bot remembers here, by keyword."""

    spec = memory_spec(
        name="memory.search",
        description="按关键词查我记得的事（这个会话里的：提问的人、about_user_id 指定的人、"
        "以及关于本群的记忆）。返回每条记忆的 id、关于谁、类型和内容；"
        "要改正或忘掉一条记忆时，先用它找到 id。",
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "关键词，如“榴莲”“生日”"},
                "about_user_id": {
                    "type": "string",
                    "description": "也查这个人（平台用户 id）的记忆；不给就只查提问的人和本群",
                },
            },
            "required": ["query"],
        },
        tags=frozenset({ToolTag.READ_ONLY}),
        hints=(*RECALL_HINTS, *CORRECT_HINTS, *FORGET_HINTS),
    )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        query = str(arguments.get("query") or "").strip()
        if not query:
            raise ToolError("要给出查找的关键词")
        chat = await _chat(context)
        people = set(chat.askers)
        about_user_id = str(arguments.get("about_user_id") or "").strip()
        if about_user_id:
            people.add(await chat.person_here(about_user_id, f"不认识用户 {about_user_id}"))
        scope = RecallScope(chat.stream_id, tuple(sorted(people)), SEARCH_KINDS)
        found = await keyword_recall(chat.engine, [query], scope, SEARCH_LIMIT)
        names = await chat.names(r.record.person_id for r in found)
        return ToolOutput([shown(r.record, named(names, r.record.person_id)) for r in found])


class PersonProfileTool(_MemoryTool):
    """`person.profile`: what the bot keeps about one person, as far as this chat may see."""

    spec = memory_spec(
        name="person.profile",
        description="看我记得的关于某个人的事：这个会话里知道的名字、记下的事实"
        "（在本会话学到的；别处学到的只有本人同意跨群使用时才有），以及是否同意跨群使用。",
        parameters={
            "type": "object",
            "properties": {"user_id": {"type": "string", "description": "平台用户 id"}},
            "required": ["user_id"],
        },
        tags=frozenset({ToolTag.READ_ONLY}),
        hints=PROFILE_HINTS,
    )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        user_id = str(arguments["user_id"]).strip()
        chat = await _chat(context)
        person_id = await chat.person_here(user_id, f"没见过用户 {user_id}，没有关于 TA 的记忆")
        consented = person_id in await self._store.consenting([person_id])
        facts = await self._store.entries(
            stream_id=None if consented else chat.stream_id,
            person_id=person_id,
            kind=MemoryKind.FACT,
            limit=PROFILE_LIMIT + 1,
        )
        name = (await chat.names([person_id]))[person_id]
        return ToolOutput(
            {
                "user_id": user_id,
                "name": name,
                "consented_to_cross_group": consented,
                "facts": [
                    {
                        **shown(f, name),
                        "learned_in": "这里" if f.stream_id == chat.stream_id else "别的会话",
                    }
                    for f in facts[:PROFILE_LIMIT]
                ],
                "more": len(facts) > PROFILE_LIMIT,
            }
        )


class MemoryCorrectTool(_MemoryTool):
    """`memory.correct`: change what an entry says, or whom it is about."""

    spec = memory_spec(
        name="memory.correct",
        description="改正一条记错的记忆（先用 memory.search 找到 id）：text 是改正后的内容；"
        "about_user_id 把它改成关于另一个人（平台用户 id），空字符串表示关于本群。"
        "本人、教的人或主人才能改（关于本群的，教的人、群管理或主人能改）；"
        "把事实改到别人身上要本人或主人来说。",
        parameters={
            "type": "object",
            "properties": {
                "memory_id": {"type": "integer", "description": "记忆的 id"},
                "text": {"type": "string", "description": "改正后的完整内容"},
                "about_user_id": {
                    "type": "string",
                    "description": '这条其实是关于谁的（平台用户 id）；"" 表示关于本群',
                },
            },
            "required": ["memory_id"],
        },
        tags=frozenset({ToolTag.SIDE_EFFECT}),
        hints=CORRECT_HINTS,
    )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        text = arguments.get("text")
        new_text = None if text is None else " ".join(str(text).split())
        about_user_id = arguments.get("about_user_id")
        if new_text is None and about_user_id is None:
            raise ToolError("要给出改正后的内容或这条是关于谁的")
        chat = await _chat(context)
        entry = await chat.visible_entry(self._store, int(arguments["memory_id"]))
        if not may_change(Change.EDIT, entry, chat.askers, chat.rank):
            if is_group_level(entry):
                raise ToolError("关于本群的记忆，只有教我的人、群管理或主人能改")
            raise ToolError("这条只有本人、教我的人或主人能改")
        changes: dict[str, Any] = {}
        move: dict[str, Any] = {}
        if about_user_id is not None:
            target = await self._target(chat, str(about_user_id).strip())
            if target != entry.person_id:
                if not may_change(Change.MOVE, entry, chat.askers, chat.rank, target):
                    raise ToolError("把这条改到别人身上，要本人或主人来说")
                move = {"person_id": target}
                names = await chat.names([entry.person_id, target])
                changes["about"] = {
                    "before": named(names, entry.person_id),
                    "after": named(names, target),
                }
        if new_text is not None and new_text != entry.text:
            changes["text"] = {"before": entry.text, "after": new_text}
        if changes:  # what the entry would say, about whom: the guard's content rules
            about = move.get("person_id", entry.person_id)
            final = entry.text if new_text is None else new_text
            await _check_text(chat, entry, final, about, context.now)
        if not changes:
            raise ToolError("和原来一样，不用改")
        corrected = await self._store.correct(
            entry.id,
            context.now,
            actor=f"tool:memory.correct turn {context.turn_id}",
            text=new_text if "text" in changes else None,
            turn_id=context.turn_id,
            **move,
        )
        if corrected is None:
            raise ToolError(f"这个会话里没有第 {entry.id} 条记忆")
        return ToolOutput(
            {"entry": shown(corrected, await chat.about(corrected)), "change": changes}
        )

    async def _target(self, chat: _Chat, user_id: str) -> int | None:
        if not user_id:
            return None
        return await chat.person_here(user_id, f"不认识用户 {user_id}")


async def _check_text(
    chat: _Chat, entry: MemoryRecord, text: str, about: int | None, now: datetime
) -> None:
    """The guard's content rules on a corrected entry, people rules included; who may
    correct is decided by the tool. A person rewording their own fact is its author (their
    own health may be kept); a group fact that points at someone is refused for everyone."""
    people = await chat_people(chat.engine, chat.stream_id, ())
    author = about if about is not None and about in chat.askers else 0
    teaching = Teaching(
        text=text,
        source_text="",
        author_person_id=author,
        about_person_id=about,
        kind=entry.kind,
        author_is_owner=True,
        others=people.others(author),
        own_ids=(*chat.asker_user_ids, *people.bots),
    )
    verdict = judge_teaching(teaching, (), now)
    if verdict.refusal is not None and verdict.refusal in CONTENT_REFUSALS:
        raise ToolError(REFUSAL_TEXT[verdict.refusal])


class MemoryForgetTool(_MemoryTool):
    """`memory.forget`: stop recalling an entry; an owner can undo it."""

    spec = memory_spec(
        name="memory.forget",
        description="忘掉一条记忆（先用 memory.search 找到 id）。本人、教的人、群管理或主人"
        "才能让我忘；关于本群的记忆只有教的人、群管理或主人能删。忘掉的记忆主人可以恢复。",
        parameters={
            "type": "object",
            "properties": {"memory_id": {"type": "integer", "description": "记忆的 id"}},
            "required": ["memory_id"],
        },
        tags=frozenset({ToolTag.SIDE_EFFECT}),
        hints=FORGET_HINTS,
    )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        chat = await _chat(context)
        entry = await chat.visible_entry(self._store, int(arguments["memory_id"]))
        if not may_change(Change.FORGET, entry, chat.askers, chat.rank):
            if is_group_level(entry):
                raise ToolError("关于本群的记忆，只有教我的人、群管理或主人能让我忘掉")
            raise ToolError("这条只有本人、教我的人或主人能让我忘掉")
        forgotten = await self._store.forget(
            entry.id,
            context.now,
            actor=f"tool:memory.forget turn {context.turn_id}",
            turn_id=context.turn_id,
        )
        if forgotten is None:
            raise ToolError(f"这个会话里没有第 {entry.id} 条记忆")
        return ToolOutput(
            {"forgotten": shown(forgotten, await chat.about(forgotten)), "undo": "主人可以恢复"}
        )


class MemoryShareTool(_MemoryTool):
    """`memory.share`: the asker allows (or stops) the use of their facts in other chats."""

    spec = memory_spec(
        name="memory.share",
        description="本人同意（allow=true）或不再同意（allow=false）把记下的关于自己的事"
        "用在别的群和私聊里。只对说这句话的人自己有效。",
        parameters={
            "type": "object",
            "properties": {"allow": {"type": "boolean"}},
            "required": ["allow"],
        },
        tags=frozenset({ToolTag.SIDE_EFFECT}),
        hints=SHARE_HINTS,
    )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        chat = await _chat(context)
        if len(chat.askers) != 1:
            raise ToolError("要本人单独说才算数")
        [person_id] = chat.askers
        if bool(arguments["allow"]):
            await self._store.grant_consent(person_id, context.now, context.watermark)
        else:
            await self._store.revoke_consent(person_id)
        return ToolOutput({"allow": bool(arguments["allow"]), "person": person_id})


def memory_tools(store: MemoryStore) -> tuple[Tool, ...]:
    return (
        MemorySearchTool(store),
        PersonProfileTool(store),
        MemoryCorrectTool(store),
        MemoryForgetTool(store),
        MemoryShareTool(store),
    )


__all__ = [
    "MemoryCorrectTool",
    "MemoryForgetTool",
    "MemorySearchTool",
    "MemoryShareTool",
    "PersonProfileTool",
    "is_group_level",
    "memory_tools",
    "names_here",
    "person_ids",
]
