"""The standard shape of everything that arrives from a chat platform."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


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
    OTHER = "other"


@dataclass(frozen=True)
class MediaRef:
    """Where a media item can be fetched later; nothing is downloaded at ingress."""

    file: str = ""
    url: str = ""
    name: str = ""
    size: int | None = None


@dataclass(frozen=True)
class Segment:
    """One piece of a message. `text` is its plain-text rendering."""

    kind: SegmentKind
    text: str = ""
    target: str | None = None  # the user of an @, the message of a reply
    media: MediaRef | None = None
    raw_type: str = ""  # the platform's segment type, kept for OTHER / CARD

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

    @property
    def mentions_me(self) -> bool:
        return self.stream.self_id in self.mentions


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


InboundEvent = InboundMessage | Recall | MemberChange
