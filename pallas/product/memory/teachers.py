"""Who teaches the memory: the chat's people as the teaching guard reads them (names to look
for, the bot's own accounts), and telling a teacher, once, why something was not kept.

  extraction refuses a proposal drawn from a line addressed to the bot ("记住…", an @)
  -> one message in the chat, @ the teacher: "这条我没记：<reason>"
  -> at most once per teacher, chat and day (the outbox key), however often they rephrase
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from loguru import logger
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import Origin
from pallas.core.facts import MemoryKind
from pallas.core.inbound import Segment, SegmentKind, StreamKind
from pallas.core.local_time import SHANGHAI
from pallas.product.conversation.delivery.contract import OutgoingMessage, Sender
from pallas.product.conversation.delivery.payload import PayloadError
from pallas.product.conversation.turns.turn import Turn
from pallas.product.llm.assembler.context import ContextBlock
from pallas.product.memory.candidates import ASKED_TO_REMEMBER
from pallas.product.teaching.guard import REFUSAL_TEXT, Refusal, Teaching, judge_teaching
from pallas.product.teaching.people import KnownPerson
from pallas.store.conversation import WindowLine
from pallas.store.models import Identity, Member, Stream

MAX_PEOPLE = 5_000  # names looked for in one chat; a bigger group's quiet members are skipped
# Refusals a teacher is told about; the rest (empty, too long, bare, cooldown) are not news.
TOLD = frozenset(
    {
        Refusal.SENSITIVE,
        Refusal.ABOUT_PEOPLE,
        Refusal.ABOUT_ANOTHER_PERSON,
        Refusal.INJECTION,
        Refusal.VULGAR,
        Refusal.BELITTLING,
    }
)


@dataclass(frozen=True)
class ChatPeople:
    known: tuple[KnownPerson, ...]  # the chat's people, the bot's accounts left out
    bots: frozenset[str]  # the bot's user ids here
    group: bool = True  # a group chat (a private one has no second member to confirm)

    def others(self, author_person_id: int) -> tuple[KnownPerson, ...]:
        return tuple(p for p in self.known if p.person_id != author_person_id)

    def mentioned(self, line: WindowLine, lines: Sequence[WindowLine] = ()) -> tuple[str, ...]:
        """Whom a line @-mentions besides its writer and the bot; a reply's @ of the person
        it answers (QQ adds one) is not pointing at them."""
        quoted = line.reply_to
        answered = {q.user_id for q in lines if quoted and q.platform_message_id == quoted}
        skip = {line.user_id, *self.bots, *answered}
        return tuple(m for m in line.mentions if m not in skip)

    def own_ids(self, line: WindowLine) -> tuple[str, ...]:
        """Numbers in a line that point at no one else: its writer's and the bot's ids."""
        return (line.user_id, *sorted(self.bots))

    def addressed(self, line: WindowLine) -> bool:
        """A line that asks the bot to remember: it @-mentions the bot or says 记住."""
        return bool(self.bots & set(line.mentions)) or bool(ASKED_TO_REMEMBER.search(line.text))


async def chat_people(
    engine: AsyncEngine, stream_id: int, lines: Sequence[WindowLine]
) -> ChatPeople:
    """The chat's members with their cards and nicknames, and the speakers of `lines`."""
    query = (
        select(Member.person_id, Member.card, Identity.user_id, Identity.nickname)
        .join(Identity, Identity.person_id == Member.person_id)
        .where(Member.stream_id == stream_id)
        .limit(MAX_PEOPLE)
    )
    async with engine.connect() as conn:
        stream = (
            await conn.execute(select(Stream.self_id, Stream.kind).where(Stream.id == stream_id))
        ).first()
        rows = (await conn.execute(query)).all()
    self_id = stream.self_id if stream is not None else ""
    bots = {line.user_id for line in lines if line.from_bot} | ({self_id} if self_id else set())
    names: dict[int, tuple[str, set[str]]] = {}
    for row in rows:
        _, found = names.setdefault(int(row.person_id), (str(row.user_id), set()))
        found.update(n for n in (row.card, row.nickname) if n)
    for line in lines:
        _, found = names.setdefault(line.sender_person_id, (line.user_id, set()))
        found.update({line.speaker} - {""})
    known = tuple(
        KnownPerson(person_id, user_id, tuple(sorted(found)))
        for person_id, (user_id, found) in names.items()
        if user_id not in bots
    )
    in_group = stream is None or stream.kind == StreamKind.GROUP.value
    return ChatPeople(known, frozenset(bots), in_group)


def refusal_notice(teacher_user_id: str, refusal: Refusal) -> tuple[Segment, ...]:
    return (
        Segment(SegmentKind.AT, target=teacher_user_id),
        Segment(SegmentKind.TEXT, text=f" 这条我没记：{REFUSAL_TEXT[refusal]}。"),
    )


class RefusalNotices:
    """Tells a teacher why a teaching was not kept: once per teacher, chat and day."""

    def __init__(self, sender: Sender, action_ids: Callable[[], int]) -> None:
        self._sender = sender
        self._action_ids = action_ids

    async def tell(
        self, stream_id: int, teacher: WindowLine, refusal: Refusal, now: datetime
    ) -> None:
        day = now.astimezone(SHANGHAI).date().isoformat()
        message = OutgoingMessage(
            self._action_ids(),
            stream_id,
            refusal_notice(teacher.user_id, refusal),
            key=f"memory.refused:{stream_id}:{teacher.sender_person_id}:{day}",
            origin=Origin.RESPONDER,
        )
        try:
            await self._sender.send(message)
        except PayloadError as exc:  # the refusal stands; only the telling failed
            logger.warning("memory: could not tell {} of a refusal: {}", teacher.user_id, exc)


# -- before the turn: a teaching that will not be kept is not answered with "记住了" -----------

UNKEPT_PRIORITY = 1  # shown before anything recalled: it decides what the answer may promise
# Refusals the teaching line alone shows; whom a fact is about waits for the model's proposal.
_PLAIN_REFUSALS = TOLD - {Refusal.ABOUT_ANOTHER_PERSON}
_SELF = re.compile(r"我|本人|俺")
_BEHAVIOURAL = re.compile(r"以后|今后|从现在|有人问|问起|提到|就说|告诉|你要|你得|你的|你能不能")


def unkept_refusal(
    text: str,
    author_person_id: int,
    owner: bool,
    people: ChatPeople,
    mentioned: Sequence[str],
    own_ids: Sequence[str],
    now: datetime,
) -> Refusal | None:
    """What the guard will refuse a line asking to be remembered for, read from the line
    alone: as a fact (about its speaker when they speak of themselves) and, when it reads
    like an instruction, as a behaviour."""
    about = author_person_id if _SELF.search(text) else None
    kinds = [(MemoryKind.FACT, about)]
    if _BEHAVIOURAL.search(text):
        kinds.append((MemoryKind.BEHAVIOR, None))
    for kind, whom in kinds:
        teaching = Teaching(
            text=text,
            source_text=text,
            author_person_id=author_person_id,
            about_person_id=whom,
            kind=kind,
            author_is_owner=owner,
            others=people.others(author_person_id),
            mentioned=tuple(mentioned),
            own_ids=tuple(own_ids),
        )
        refusal = judge_teaching(teaching, (), now).refusal
        if refusal in _PLAIN_REFUSALS:
            return refusal
    return None


class UnkeptTeachingNote:
    """A context source: when someone in the batch asks the bot to remember something the
    guard will refuse, the turn is told so (and why), so its answer says so instead of
    "记住了". No read at all unless a line asks to be remembered."""

    name = "unkept_teaching"

    def __init__(
        self, engine: AsyncEngine, superusers: frozenset[str], clock: Callable[[], datetime]
    ) -> None:
        self._engine = engine
        self._superusers = superusers
        self._clock = clock

    async def fetch(self, turn: Turn) -> ContextBlock | None:
        asked = [m for m in turn.messages if ASKED_TO_REMEMBER.search(m.message.text)]
        if not asked:
            return None
        people = await chat_people(self._engine, turn.stream_id, ())
        for stored in asked:
            sender = stored.message.sender
            mentioned = [
                m for m in stored.message.mentions if m != sender.user_id and m not in people.bots
            ]
            refusal = unkept_refusal(
                stored.message.text,
                stored.sender_person_id,
                sender.user_id in self._superusers,
                people,
                mentioned,
                (sender.user_id, *people.bots),
                self._clock(),
            )
            if refusal is not None:
                name = sender.display_name
                text = (
                    f"{name} 刚才让你记住的话不会被记下：{REFUSAL_TEXT[refusal]}。"
                    "回答时别说“记住了”，可以直接说这条不记。"
                )
                return ContextBlock(
                    self.name, "这条不会记", text, UNKEPT_PRIORITY, {"refusal": refusal.value}
                )
        return None


__all__ = [
    "TOLD",
    "ChatPeople",
    "RefusalNotices",
    "UnkeptTeachingNote",
    "chat_people",
    "refusal_notice",
    "unkept_refusal",
]
