"""OneBot v11 events (as the NoneBot adapter parsed them) -> the core's inbound shapes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from nonebot.adapters.onebot.v11 import (
    Event,
    FriendRecallNoticeEvent,
    GroupDecreaseNoticeEvent,
    GroupIncreaseNoticeEvent,
    GroupMessageEvent,
    GroupRecallNoticeEvent,
    MessageEvent,
    MetaEvent,
    NoticeEvent,
    PokeNotifyEvent,
    PrivateMessageEvent,
    RequestEvent,
)
from nonebot.compat import model_dump, type_validate_python

from pallas.core.inbound import (
    GroupNotice,
    InboundEvent,
    InboundMessage,
    MemberChange,
    Recall,
    Segment,
    SegmentKind,
    Sender,
    StreamKey,
    StreamKind,
    poke_id,
)
from pallas.core.text import excerpt, render_plain_text
from pallas.platform.onebot import PLATFORM
from pallas.platform.onebot.group_notices import (
    UnreadableNoticeError,
    is_recorded_notice,
    read_group_notice,
)
from pallas.platform.onebot.segments import convert_segments


class UnsupportedEventError(ValueError):
    """The event cannot be turned into a standard shape; the message says why."""


@dataclass(frozen=True)
class Translation:
    """The result of translating one event. `event` is None when there is nothing to record."""

    event: InboundEvent | None
    unknown_segment_types: tuple[str, ...] = ()


NOTHING = Translation(None)


def translate_event(event: Event) -> Translation:
    """Translate one event; raise UnsupportedEventError for shapes we cannot read."""
    expected = _expected_model(event)
    if expected is not None and not isinstance(event, expected):
        raise UnsupportedEventError(f"{event.get_event_name()} event is missing required fields")
    if isinstance(event, MessageEvent):
        return _message(event, from_bot=str(event.user_id) == str(event.self_id))
    if event.post_type == "message_sent":
        # NapCat reports the bot's own messages (sent from any client) with this post type.
        return _message(_reparse_own_message(event), from_bot=True)
    if isinstance(event, NoticeEvent):
        return Translation(_notice(event))
    if isinstance(event, MetaEvent | RequestEvent):
        return NOTHING
    if event.post_type in ("message", "notice", "request", "meta_event"):
        raise UnsupportedEventError(f"{event.post_type} event is missing required fields")
    raise UnsupportedEventError(f"unknown post_type {event.post_type!r}")


_NOTICE_MODELS: dict[str, type[Event]] = {
    "group_recall": GroupRecallNoticeEvent,
    "friend_recall": FriendRecallNoticeEvent,
    "group_increase": GroupIncreaseNoticeEvent,
    "group_decrease": GroupDecreaseNoticeEvent,
}


def _expected_model(event: Event) -> type[Event] | None:
    """The model a well-formed event of this name parses into, for the kinds we record.

    The adapter falls back to a more general model when fields are missing; a group
    message without its group id must not be mistaken for a private one.
    """
    if event.post_type == "message":
        return {"group": GroupMessageEvent, "private": PrivateMessageEvent}.get(
            str(getattr(event, "message_type", "")), MessageEvent
        )
    if event.post_type != "notice":
        return None
    notice_type = str(getattr(event, "notice_type", ""))
    if notice_type == "notify" and getattr(event, "sub_type", "") == "poke":
        return PokeNotifyEvent
    return _NOTICE_MODELS.get(notice_type)


def _time(seconds: int) -> datetime:
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):  # frames.py repairs these on the wire
        return datetime.now(UTC)


def _stream(self_id: int, kind: StreamKind, external_id: int | str) -> StreamKey:
    return StreamKey(PLATFORM, str(self_id), kind, str(external_id))


def _message(event: MessageEvent, *, from_bot: bool) -> Translation:
    raw = event.original_message if event.original_message else event.message
    converted = convert_segments((seg.type, seg.data) for seg in raw)
    segments = converted.segments
    msg = InboundMessage(
        stream=_message_stream(event, from_bot),
        sender=Sender(
            user_id=str(event.user_id),
            nickname=event.sender.nickname or "",
            card=event.sender.card or "",
            role=event.sender.role or "",
        ),
        platform_message_id=str(event.message_id),
        time=_time(event.time),
        segments=segments,
        text=render_plain_text(segments),
        reply_to=next((s.target for s in segments if s.kind is SegmentKind.REPLY), None),
        mentions=tuple(s.target for s in segments if s.kind is SegmentKind.AT and s.target),
        mentions_all=any(s.kind is SegmentKind.AT_ALL for s in segments),
        from_bot=from_bot,
        truncated=converted.truncated,
        stream_name=_string_field(event, "group_name"),
        via_group=_temp_chat_group(event),
        qq_seq=_qq_seq(event),
    )
    return Translation(msg, converted.unknown_types)


def _qq_seq(event: MessageEvent) -> str | None:
    """NapCat's `real_seq`: QQ's sequence number, the same on every account (docs/accounts.md)."""
    value = getattr(event, "real_seq", None)
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    seq = str(value).strip()
    return seq if seq and seq != "0" and len(seq) <= 40 else None


def _string_field(event: Event, name: str) -> str:
    value = getattr(event, name, "")
    return value if isinstance(value, str) else ""


def _temp_chat_group(event: MessageEvent) -> str | None:
    """The group a temporary private chat came through (NapCat: sub_type "group")."""
    if isinstance(event, GroupMessageEvent) or getattr(event, "sub_type", "") != "group":
        return None
    group_id = getattr(event, "group_id", None)
    if isinstance(group_id, bool) or not isinstance(group_id, int | str):
        return None
    group = str(group_id)
    return group if group.isdigit() and group != "0" else None


def _message_stream(event: MessageEvent, from_bot: bool) -> StreamKey:
    if isinstance(event, GroupMessageEvent):
        return _stream(event.self_id, StreamKind.GROUP, event.group_id)
    # A private message the bot sent belongs to the chat with its recipient.
    peer = getattr(event, "target_id", None) if from_bot else None
    return _stream(event.self_id, StreamKind.PRIVATE, peer or event.user_id)


def _reparse_own_message(event: Event) -> MessageEvent:
    data = model_dump(event)
    data["post_type"] = "message"
    model = GroupMessageEvent if data.get("message_type") == "group" else PrivateMessageEvent
    try:
        return type_validate_python(model, data)
    except Exception as exc:  # the validation error lists every field: one line of it
        raise UnsupportedEventError(
            f"malformed message_sent event: {excerpt(str(exc), 160)}"
        ) from None


def _notice(event: NoticeEvent) -> InboundEvent | None:
    if isinstance(event, PokeNotifyEvent):
        return _poke(event)
    if isinstance(event, GroupRecallNoticeEvent):
        return Recall(
            _stream(event.self_id, StreamKind.GROUP, event.group_id),
            str(event.message_id),
            str(event.operator_id),
            _time(event.time),
        )
    if isinstance(event, FriendRecallNoticeEvent):
        return Recall(
            _stream(event.self_id, StreamKind.PRIVATE, event.user_id),
            str(event.message_id),
            str(event.user_id),
            _time(event.time),
        )
    if isinstance(event, GroupIncreaseNoticeEvent | GroupDecreaseNoticeEvent):
        return MemberChange(
            _stream(event.self_id, StreamKind.GROUP, event.group_id),
            user_id=str(event.user_id),
            operator_id=str(event.operator_id),
            joined=isinstance(event, GroupIncreaseNoticeEvent),
            time=_time(event.time),
            sub_type=event.sub_type,
        )
    return _group_notice(event)


def _group_notice(event: NoticeEvent) -> GroupNotice | None:
    """Essence, cards, bans, titles...; None for notices outside the timeline."""
    notice_type, sub_type = event.notice_type, getattr(event, "sub_type", "")
    if not is_recorded_notice(str(notice_type), str(sub_type)):
        return None  # e.g. typing notices, which come often: no copy of the event made
    try:
        return read_group_notice(model_dump(event))
    except UnreadableNoticeError as exc:
        raise UnsupportedEventError(str(exc)) from None


def _poke(event: PokeNotifyEvent) -> InboundMessage:
    if event.group_id:
        poker = event.user_id
        stream = _stream(event.self_id, StreamKind.GROUP, event.group_id)
    else:
        # A friend poke: NapCat names the chat partner in user_id and the poker in sender_id.
        sender_id = getattr(event, "sender_id", None)
        poker = sender_id if isinstance(sender_id, int) and sender_id else event.user_id
        partner = event.user_id if event.user_id != event.self_id else event.target_id
        stream = _stream(event.self_id, StreamKind.PRIVATE, partner)
    from_bot = poker == event.self_id
    target = str(event.target_id)
    # Synthetic text: ids only, so the bot's name can never appear in it.
    segment = Segment(
        SegmentKind.OTHER, text=f"[戳一戳 → {target}]", target=target, raw_type="poke"
    )
    return InboundMessage(
        stream=stream,
        sender=Sender(user_id=str(poker)),
        platform_message_id=poke_id(str(poker), target, event.time),
        time=_time(event.time),
        segments=(segment,),
        text=segment.text,
        mentions=(target,),
        is_poke=True,
        from_bot=from_bot,
    )
