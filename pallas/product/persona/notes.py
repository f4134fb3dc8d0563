"""Relation notes observed from what a person says of themselves (pure).

Only plain statements about the speaker, in fixed shapes, become notes: how to address them
("叫我阿明", "我叫小明") and who they are to someone ("我是小红的哥哥"). Nothing is inferred,
nothing about character is kept, and a note that would be vulgar or belittling is refused by
the memory guard's own rules.
"""

from __future__ import annotations

import re

from pallas.product.memory.guard import find_belittling, find_vulgar, normalise

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
