"""The standard shape of everything that arrives from a chat platform."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pallas.core.actions import Origin


class StreamKind(StrEnum):
    GROUP = "group"
    PRIVATE = "private"


class SegmentKind(StrEnum):
    TEXT = "text"
    AT = "at"
    AT_ALL = "at_all"
    REPLY = "reply"
    FACE = "face"
    IMAGE = "image"
    RECORD = "record"
    VIDEO = "video"
    FILE = "file"
    CARD = "card"
    FORWARD = "forward"
    MARKET_FACE = "market_face"  # a sticker from QQ's sticker shop (商城表情)
    OTHER = "other"


@dataclass(frozen=True)
class MediaRef:
    """Where a media item can be fetched later; nothing is downloaded at ingress."""

    file: str = ""
    url: str = ""
    name: str = ""
    size: int | None = None
    asset: str = ""  # `asset:<path>` once the file is kept in the asset store (docs/media.md)


@dataclass(frozen=True)
class Segment:
    """One piece of a message. `text` is its plain-text rendering."""

    kind: SegmentKind
    text: str = ""
    target: str | None = None  # the user of an @, the message of a reply
    media: MediaRef | None = None
    raw_type: str = ""  # the platform's segment type, kept for OTHER / CARD
    # What else is needed to show or resend it (a market face's key, a file's size...).
    detail: tuple[tuple[str, str], ...] = ()

    def detail_value(self, key: str) -> str:
        return next((value for name, value in self.detail if name == key), "")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind.value}
        if self.text:
            data["text"] = self.text
        if self.target is not None:
            data["target"] = self.target
        if self.media is not None:
            data["media"] = {k: v for k, v in vars(self.media).items() if v not in ("", None)}
        if self.raw_type:
            data["raw_type"] = self.raw_type
        if self.detail:
            data["detail"] = dict(self.detail)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Segment:
        media = data.get("media")
        return cls(
            kind=SegmentKind(data["kind"]),
            text=data.get("text", ""),
            target=data.get("target"),
            media=MediaRef(**media) if media is not None else None,
            raw_type=data.get("raw_type", ""),
            detail=tuple((str(k), str(v)) for k, v in (data.get("detail") or {}).items()),
        )


@dataclass(frozen=True)
class StreamKey:
    """A conversation as the platform names it: one group, or one private chat."""

    platform: str
    self_id: str
    kind: StreamKind
    external_id: str


@dataclass(frozen=True)
class Sender:
    user_id: str
    nickname: str = ""
    card: str = ""  # group card (the name shown in this group), if any
    role: str = ""  # in a group: owner / admin / member, when the platform says

    @property
    def display_name(self) -> str:
        return self.card or self.nickname or self.user_id


@dataclass(frozen=True)
class InboundMessage:
    """A message (or a poke) as the rest of the bot sees it, never raw platform data."""

    stream: StreamKey
    sender: Sender
    platform_message_id: str
    time: datetime
    segments: tuple[Segment, ...]
    text: str
    reply_to: str | None = None
    mentions: tuple[str, ...] = ()
    mentions_all: bool = False
    is_poke: bool = False
    from_bot: bool = False
    truncated: bool = False
    stream_name: str = ""  # the group's name as the platform reported it with this message
    # A private chat opened through a group (temporary chat): that group, needed to reply.
    via_group: str | None = None
    # The bot's own message: which part of the bot sent it, when known.
    origin: Origin | None = None
    # QQ's own sequence number in the chat: the same for every account that sees the message
    # (its platform id is each account's own), when the platform reports it.
    qq_seq: str | None = None

    @property
    def mentions_me(self) -> bool:
        return self.stream.self_id in self.mentions


def poke_id(poker: str, target: str, seconds: int) -> str:
    """The synthetic id of a poke (pokes have none); see pallas/store/poke_echoes.py."""
    return f"poke:{poker}:{target}:{seconds}"


@dataclass(frozen=True)
class Recall:
    """A message was withdrawn; the timeline keeps it, marked recalled."""

    stream: StreamKey
    platform_message_id: str
    operator_id: str
    time: datetime


@dataclass(frozen=True)
class MemberChange:
    stream: StreamKey
    user_id: str
    operator_id: str
    joined: bool
    time: datetime
    sub_type: str = ""
    detail: dict[str, str] = field(default_factory=dict)


class NoticeKind(StrEnum):
    """Group happenings a member would notice, recorded as timeline facts."""

    ESSENCE_ADDED = "essence_added"
    ESSENCE_REMOVED = "essence_removed"
    CARD_CHANGED = "card_changed"
    MEMBER_BANNED = "member_banned"
    MEMBER_UNBANNED = "member_unbanned"
    TITLE_CHANGED = "title_changed"
    GROUP_RENAMED = "group_renamed"
    ADMIN_SET = "admin_set"
    ADMIN_UNSET = "admin_unset"
    FILE_UPLOADED = "file_uploaded"
    REACTION_ADDED = "reaction_added"
    REACTION_REMOVED = "reaction_removed"


@dataclass(frozen=True)
class GroupNotice:
    """Something that happened in a group besides a message (a ban, a new card, 精华...).

    `value` is the new state where there is one (the card, the title, the group name, the
    ban's seconds, the file name, the emoji ids); `message_id` the platform id of the message
    it concerns (essence, reactions).
    """

    stream: StreamKey
    kind: NoticeKind
    user_id: str
    operator_id: str
    time: datetime
    value: str = ""
    message_id: str | None = None


@dataclass(frozen=True)
class MemberProfile:
    """What the platform says of a group member when asked (someone @-mentioned, say)."""

    stream: StreamKey
    user_id: str
    nickname: str
    card: str = ""
    role: str = ""


@dataclass(frozen=True)
class ForwardContent:
    """A forwarded conversation's first lines, fetched after the message that carried it."""

    stream: StreamKey
    platform_message_id: str  # the message with the forward segment
    forward_id: str
    summary: str


InboundEvent = InboundMessage | Recall | MemberChange | GroupNotice | MemberProfile | ForwardContent
