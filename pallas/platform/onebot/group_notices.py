"""Group notices a member would notice -> GroupNotice facts.

Shapes follow NapCat's notice events (packages/napcat-onebot/event/notice/): 精华 (essence),
card changes, bans, titles, renames, admins, uploads and emoji likes. Most have no model in
the upstream adapter, so their fields are read here from the event's own data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from pallas.core.inbound import GroupNotice, NoticeKind, StreamKey, StreamKind
from pallas.core.numbers import PLATFORM_DIGITS, fits_platform, read_int
from pallas.platform.onebot import PLATFORM

Data = Mapping[str, Any]
_VALUE_CHARS = 128


class UnreadableNoticeError(ValueError):
    """A notice of a kind the timeline records, without the fields it needs."""


def is_recorded_notice(notice_type: str, sub_type: str) -> bool:
    """Whether notices of this kind become facts (typing and profile likes, say, do not)."""
    name = f"notify.{sub_type}" if notice_type == "notify" else notice_type
    return name in _READERS


def read_group_notice(data: Data) -> GroupNotice | None:
    """The fact a group notice records; None for notices outside the timeline."""
    reader = _READERS.get(_notice_name(data))
    if reader is None:
        return None
    kind, user_key, value = reader(data)
    group_id = _int(data, "group_id")
    time = _int(data, "time")
    # An emoji like may not say who liked (NapCat reports 0 or nothing then).
    anonymous = kind in (NoticeKind.REACTION_ADDED, NoticeKind.REACTION_REMOVED)
    user_id = _optional_int(data, user_key) if anonymous else _int(data, user_key)
    return GroupNotice(
        stream=StreamKey(PLATFORM, str(_int(data, "self_id")), StreamKind.GROUP, str(group_id)),
        kind=kind,
        user_id=str(user_id or 0),
        operator_id=str(_optional_int(data, "operator_id") or ""),
        time=datetime.fromtimestamp(time, UTC),
        value=" ".join(value.split())[:_VALUE_CHARS],
        message_id=str(data["message_id"]) if _optional_int(data, "message_id") else None,
    )


def _notice_name(data: Data) -> str:
    notice_type = str(data.get("notice_type", ""))
    if notice_type == "notify":
        return f"notify.{data.get('sub_type', '')}"
    return notice_type


def _int(data: Data, key: str) -> int:
    value = _optional_int(data, key)
    if value is None:
        raise UnreadableNoticeError(f"{_notice_name(data)} notice without a readable {key}")
    return value


def _optional_int(data: Data, key: str) -> int | None:
    value = data.get(key)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if fits_platform(value) else None
    if isinstance(value, str):
        number = read_int(value, PLATFORM_DIGITS)
        return number if number is not None and number >= 0 else None
    return None


def _str(data: Data, key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


Reading = tuple[NoticeKind, str, str]  # kind, the key naming the member, the new value


def _card(data: Data) -> Reading:
    return NoticeKind.CARD_CHANGED, "user_id", _str(data, "card_new")


def _essence(data: Data) -> Reading:
    removed = data.get("sub_type") == "delete"
    kind = NoticeKind.ESSENCE_REMOVED if removed else NoticeKind.ESSENCE_ADDED
    return kind, "sender_id", ""


def _ban(data: Data) -> Reading:
    if data.get("sub_type") == "lift_ban":
        return NoticeKind.MEMBER_UNBANNED, "user_id", ""
    return NoticeKind.MEMBER_BANNED, "user_id", str(_optional_int(data, "duration") or 0)


def _title(data: Data) -> Reading:
    return NoticeKind.TITLE_CHANGED, "user_id", _str(data, "title")


def _rename(data: Data) -> Reading:
    return NoticeKind.GROUP_RENAMED, "user_id", _str(data, "name_new")


def _admin(data: Data) -> Reading:
    unset = data.get("sub_type") == "unset"
    return (NoticeKind.ADMIN_UNSET if unset else NoticeKind.ADMIN_SET), "user_id", ""


def _upload(data: Data) -> Reading:
    file = data.get("file")
    name = _str(file, "name") if isinstance(file, Mapping) else ""
    return NoticeKind.FILE_UPLOADED, "user_id", name


def _emoji_like(data: Data) -> Reading:
    likes = data.get("likes")
    emoji = [
        str(like.get("emoji_id"))
        for like in (likes if isinstance(likes, list) else [])
        if isinstance(like, Mapping) and like.get("emoji_id") is not None
    ]
    kind = NoticeKind.REACTION_REMOVED if data.get("is_add") is False else NoticeKind.REACTION_ADDED
    # NapCat leaves user_id 0 when it cannot tell who reacted.
    return kind, "user_id", ",".join(emoji)


_READERS: dict[str, Callable[[Data], Reading]] = {
    "group_card": _card,
    "essence": _essence,
    "group_ban": _ban,
    "notify.title": _title,
    "notify.group_name": _rename,
    "group_admin": _admin,
    "group_upload": _upload,
    "group_msg_emoji_like": _emoji_like,
}
