"""Relation notes observed from what a person says of themselves (pure).

The extraction call that runs after turns anyway may propose notes too (`relation.note`);
`admit_extracted` keeps only what the writer's own message states about themselves.

Only plain statements about the speaker, in fixed shapes, become notes: how to address them
("叫我阿明", "我叫小明") and who they are to someone ("我是小红的哥哥"). Nothing is inferred,
nothing about character is kept, and a note that would be vulgar or belittling is refused by
the memory guard's own rules.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pallas.core.terms import index_terms
from pallas.product.teaching.guard import find_belittling, find_vulgar, normalise

_NAME = r"(?P<name>[^\s，,。.！!？?~～、；;：:（）()【】\[\]「」“”\"']{1,12})"
_ADDRESS = re.compile(rf"(?:以后|你可以|可以|就)?叫我{_NAME}")
_CALLED = re.compile(rf"(?:我叫|我的名字是|我名字叫){_NAME}")
_RELATION = re.compile(r"我是(?P<whom>[^\s，,。.！!？?的]{1,8})的(?P<role>[^\s，,。.！!？?]{1,6})")
# "叫我" followed by these is a request, not a name ("叫我一声", "叫我起床").
_NOT_NAMES = ("一声", "起床", "干嘛", "什么", "啥", "去", "来", "吃")
_PARTICLES = "吧呀啊哦呢嘛啦哈噢咯"
_NOT_WHOM = ("你", "你们", "您")  # "我是你爸爸" to the bot is a taunt, not a relation


def observed_notes(words: str) -> list[str]:
    """The notes `words` (what one person typed) state about themselves."""
    notes = []
    address = _ADDRESS.search(words)
    if address and not address.group("name").startswith(_NOT_NAMES):
        notes.append(f"希望被叫作{_bare(address.group('name'))}")
    called = _CALLED.search(words)
    if called:
        notes.append(f"名字是{_bare(called.group('name'))}")
    relation = _RELATION.search(words)
    if relation and relation.group("whom") not in _NOT_WHOM:
        notes.append(f"是{relation.group('whom')}的{relation.group('role')}")
    return [note for note in notes if acceptable(note)]


def _bare(name: str) -> str:
    return name.rstrip(_PARTICLES) or name


def acceptable(note: str) -> bool:
    forms = normalise(note)
    return find_vulgar(forms) is None and find_belittling(forms) is None


class NoteRefusal(StrEnum):
    NOT_SELF = "not_self"  # about someone other than the writer, or not said in the first person
    VULGAR = "vulgar"  # the memory guard's word lists refuse it
    INFERRED = "inferred"  # a guess or a judgment of character, not a stated fact
    NOT_STATED = "not_stated"  # the message does not say it
    TOO_LONG = "too_long"


MAX_NOTE_CHARS = 40
STATED_SHARE = 0.6  # of the note's terms, at least this share must be in the message itself
# Guesses and judgments of character: a note only keeps what the person said of themselves.
_INFERRED = (
    "可能", "好像", "似乎", "应该", "大概", "估计", "感觉", "觉得", "看起来", "显然",
    "性格", "人品", "脾气", "为人", "靠谱", "聪明", "善良", "自私", "小气", "大方",
    "内向", "外向", "情商", "智商", "是个好人", "是个坏人", "人很", "人不错",
)  # fmt: skip
_FIRST_PERSON = ("我", "俺", "咱", "本人")


def admit_extracted(
    note: str, source_text: str, author: str, about: str | None
) -> NoteRefusal | None:
    """Whether a relation note proposed by the extraction call may be kept (pure): only what
    the writer's own message states directly about themselves (identity, how to address them,
    preferences, relationships), never an inference or a judgment of character."""
    text = note.strip()
    if about != author or not any(word in source_text for word in _FIRST_PERSON):
        return NoteRefusal.NOT_SELF
    if len(text) > MAX_NOTE_CHARS:
        return NoteRefusal.TOO_LONG
    if not acceptable(text):
        return NoteRefusal.VULGAR
    if any(word in text for word in _INFERRED):
        return NoteRefusal.INFERRED
    wanted = index_terms(text)
    if not wanted or len(wanted & index_terms(source_text)) < STATED_SHARE * len(wanted):
        return NoteRefusal.NOT_STATED
    return None
