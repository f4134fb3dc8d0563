"""Pure text signals: is the bot named, does a message ask the group something."""

from __future__ import annotations

import re
from collections.abc import Iterable

_QUESTION_END = re.compile(r"[?？]\s*$")
_QUESTION_WORDS = ("有人知道", "有没有人", "谁知道", "谁会", "大家知道", "求问", "请问", "有谁")
_OPENING_PUNCT = " ,，:：!！~～、"


def names_in(text: str, names: Iterable[str]) -> bool:
    lowered = text.casefold()
    return any(name.casefold() in lowered for name in names if name)


def opens_with_name(text: str, names: Iterable[str]) -> bool:
    head = text.lstrip(_OPENING_PUNCT).casefold()
    return any(head.startswith(name.casefold()) for name in names if name)


def looks_like_public_question(text: str, mentions_someone_else: bool) -> bool:
    """A question put to the room: not addressed to another member, phrased as a question."""
    if mentions_someone_else:
        return False
    stripped = text.strip()
    return any(word in stripped for word in _QUESTION_WORDS) or (
        bool(_QUESTION_END.search(stripped)) and len(stripped) >= 6
    )
