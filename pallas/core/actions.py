"""What the bot can do in a chat besides talking, in platform-neutral terms."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType


@dataclass(frozen=True)
class SentLookup:
    """What the platform's own message history says of a send whose receipt was lost."""

    answered: bool  # False: the history could not be read (no connection, an error)
    platform_message_id: str | None = None  # the bot's message with that text, if there


HISTORY_UNREADABLE = SentLookup(answered=False)


def is_platform_id(value: str | None) -> bool:
    """OneBot ids are integers on the wire (NapCat message ids may be negative)."""
    digits = "" if value is None else value.removeprefix("-")
    return digits.isascii() and digits.isdigit()


class Capability(StrEnum):
    """An action the connected platform implementation is known to perform."""

    POKE = "poke"
    REACT = "react"


# The closed reaction vocabulary: the name the model uses -> the classic QQ face id that
# NapCat's `set_msg_emoji_like` takes. Closed, so the model cannot invent an id that QQ
# rejects; every id here is one QQ offers as a message reaction.
REACTIONS: Mapping[str, str] = MappingProxyType(
    {
        "赞": "76",
        "爱心": "66",
        "笑哭": "182",
        "OK": "124",
        "疑问": "32",
        "拥抱": "49",
        "鼓掌": "99",
        "捂脸": "264",
        "喝彩": "144",
        "doge": "179",
        "吃瓜": "271",
        "大哭": "9",
        "玫瑰": "63",
    }
)


# Lookup ignores surrounding space and letter case: a model writes "ok" as often as "OK".
_BY_FOLDED_NAME = {name.casefold(): face_id for name, face_id in REACTIONS.items()}


def reaction_id(name: str) -> str | None:
    """The face id for a reaction name, or None if the name is not in the vocabulary."""
    return _BY_FOLDED_NAME.get(name.strip().casefold())
