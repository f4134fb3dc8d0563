"""What the bot can do in a chat besides talking, in platform-neutral terms."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import ClassVar


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


class OutboxKind(StrEnum):
    """What one outbox row asks the platform to do."""

    MESSAGE = "message"
    POKE = "poke"
    REACT = "react"


class Origin(StrEnum):
    """Which part of the bot an outgoing action comes from. Kept on its outbox row and on
    the recorded message, so the gate can tell the bot taking part in the talk from the bot
    answering a command or greeting a newcomer (docs/gating.md)."""

    AGENT_REPLY = "agent_reply"  # the model's answer in a turn
    PROACTIVE = "proactive"  # a turn the bot started itself (a follow-up, a kept promise)
    COMMAND = "command"  # a chat command's answer
    RESPONDER = "responder"  # a rule without a model: a repeat, a poke back, a welcome
    TASK = "task"  # a scheduled task's message
    LEARNED = "learned"  # a line learned from the group, said without a model
    NOTICE = "notice"  # the bot telling its owners something about itself


# Only these count as the bot speaking in the conversation: they use the gate's frequency
# cap and open the natural reply window. A learned line is free and a command's answer is
# not talk: neither should invite the model to read the lines that follow.
CONVERSATIONAL = frozenset({Origin.AGENT_REPLY, Origin.PROACTIVE})


def counts_as_speaking(origin: str | None) -> bool:
    """Whether the bot's message counts as it speaking in the conversation. No origin (a
    message typed on the bot's account by hand, or recorded before origins were kept)
    counts, as every message of the bot did before."""
    return origin is None or origin in CONVERSATIONAL


@dataclass(frozen=True)
class Poke:
    """Poke someone in the chat."""

    user_id: str
    kind: ClassVar[OutboxKind] = OutboxKind.POKE

    def to_payload(self) -> dict[str, str]:
        return {"user_id": self.user_id}


@dataclass(frozen=True)
class Reaction:
    """Put a reaction from the vocabulary on a message."""

    message_id: str  # the platform's id of the message
    emoji: str  # a name in REACTIONS
    kind: ClassVar[OutboxKind] = OutboxKind.REACT

    def to_payload(self) -> dict[str, str]:
        return {"message_id": self.message_id, "emoji": self.emoji}


ChatAction = Poke | Reaction


def action_of(kind: str, payload: Mapping[str, object]) -> ChatAction:
    """The typed action of a stored poke or reaction row (KeyError for a malformed one)."""
    if kind == OutboxKind.POKE:
        return Poke(str(payload["user_id"]))
    if kind == OutboxKind.REACT:
        return Reaction(str(payload["message_id"]), str(payload["emoji"]))
    raise ValueError(f"{kind!r} is not a poke or a reaction")
