"""Repair what can be repaired in an event frame before the adapter's models read it.

NapCat (and whatever else speaks OneBot on the socket) can send a frame that is mostly
right: one segment of the wrong shape, a nickname that is a number, a broken emoji escaped
as a lone surrogate, a timestamp out of range. The upstream models refuse the whole event
for any of these, and the message would be lost. Here each such part is fixed or replaced
by a marked placeholder, so the message is stored with what could be read, and the repairs
are named for one warning line. A frame that says nothing readable (no message id, a
message type that is not one) is still refused by the models, with one warning.

Everything is iterative: a frame nested thousands deep costs no recursion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pallas.core.text import excerpt

UNREADABLE_SEGMENT = "pallas_unreadable"  # the type given to a segment that could not be read
MAX_DEPTH = 40  # deeper containers become a placeholder (nested forwards stay well inside)
MAX_TIME = 253_402_300_799  # 9999-12-31: the last second a datetime can hold
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_CUT = "[…]"

# Top-level fields the adapter's models read as integers: required ones stay (a message
# without its ids is unreadable), optional ones go when they are not numbers.
_REQUIRED_INTS = ("self_id", "message_id", "user_id", "group_id")
_OPTIONAL_INTS = ("target_id", "real_id", "message_seq", "sender_id", "operator_id", "temp_source")
_MESSAGE_STRINGS = ("raw_message", "group_name", "message_format", "real_seq")
_SENDER_STRINGS = ("nickname", "card", "role", "sex", "area", "level", "title")
_SENDER_INTS = ("user_id", "age")


@dataclass(frozen=True)
class CleanFrame:
    payload: dict[str, Any]
    repairs: tuple[str, ...]  # what was fixed, for the log; empty for a well-formed frame


def may_hold_surrogates(text: str) -> bool:
    """Whether the JSON text escapes a UTF-16 surrogate (a broken emoji, or a valid pair)."""
    return _ESCAPED_SURROGATE.search(text) is not None


def clean_event(payload: dict[str, Any], *, now_s: int, surrogates: bool) -> CleanFrame:
    """The payload with its readable parts in the shapes the models expect.

    `now_s` stands in for a timestamp that cannot be one; `surrogates` says whether strings
    may hold lone surrogates (see may_hold_surrogates), which no database can store.
    """
    repairs: list[str] = []
    if surrogates and _fix_surrogates(payload):
        repairs.append("lone surrogates replaced")
    if _bracket_count(payload) > MAX_DEPTH and _cut_deep(payload):
        repairs.append(f"parts nested over {MAX_DEPTH} levels cut")
    _fix_time(payload, now_s, repairs)
    _fix_ints(payload, repairs)
    if payload.get("post_type") in ("message", "message_sent"):
        _fix_message_envelope(payload, repairs)
        if "message" in payload:
            payload["message"] = _clean_segments(payload["message"], repairs)
    return CleanFrame(payload, tuple(repairs))


# -- strings -------------------------------------------------------------------------------


def _fixed_string(value: str) -> str:
    # Pairs become their character again; a lone surrogate becomes U+FFFD.
    return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _has_surrogate(value: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in value)


def _fix_surrogates(root: dict[str, Any]) -> bool:
    fixed = False
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in list(node):
                value = node[key]
                if isinstance(value, str) and _has_surrogate(value):
                    node[key] = value = _fixed_string(value)
                    fixed = True
                if isinstance(key, str) and _has_surrogate(key):
                    node[_fixed_string(key)] = node.pop(key)
                    fixed = True
                stack.append(value)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                if isinstance(value, str) and _has_surrogate(value):
                    node[index] = _fixed_string(value)
                    fixed = True
                stack.append(value)
    return fixed


# -- depth ---------------------------------------------------------------------------------


def _bracket_count(payload: dict[str, Any]) -> int:
    """An upper bound on the nesting depth, cheap for the common small event."""
    count = 0
    stack: list[Any] = [payload]
    while stack and count <= MAX_DEPTH:
        node = stack.pop()
        if isinstance(node, dict):
            count += 1
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            count += 1
            stack.extend(v for v in node if isinstance(v, dict | list))
    return count


def _cut_deep(root: dict[str, Any]) -> bool:
    cut = False
    stack: list[tuple[Any, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in list(items):
            if not isinstance(value, dict | list):
                continue
            if depth >= MAX_DEPTH:
                node[key] = _CUT
                cut = True
            else:
                stack.append((value, depth + 1))
    return cut


# -- envelope ------------------------------------------------------------------------------


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def _fix_time(payload: dict[str, Any], now_s: int, repairs: list[str]) -> None:
    seconds = _as_int(payload.get("time"))
    if seconds is None or not 0 < seconds <= MAX_TIME:
        if "time" in payload:
            repairs.append(f"time {excerpt(repr(payload['time']), 40)} replaced by arrival time")
        seconds = now_s
    payload["time"] = seconds


def _fix_ints(payload: dict[str, Any], repairs: list[str]) -> None:
    for key in (*_REQUIRED_INTS, *_OPTIONAL_INTS):
        if key not in payload or isinstance(payload[key], int):
            continue
        number = _as_int(payload[key])
        if number is not None:
            payload[key] = number
        elif key in _OPTIONAL_INTS:
            repairs.append(f"{key} dropped")
            del payload[key]


def _fix_message_envelope(payload: dict[str, Any], repairs: list[str]) -> None:
    for key in _MESSAGE_STRINGS:
        if key in payload and not isinstance(payload[key], str):
            repairs.append(f"{key} dropped")
            del payload[key]
    if not isinstance(payload.get("sub_type"), str):
        payload["sub_type"] = "normal" if payload.get("message_type") == "group" else "friend"
    if not isinstance(payload.get("font"), int):
        payload["font"] = 14
    if "anonymous" in payload and not isinstance(payload["anonymous"], dict):
        payload["anonymous"] = None
    sender = payload.get("sender")
    if not isinstance(sender, dict):
        if sender is not None:
            repairs.append("sender replaced")
        payload["sender"] = {"user_id": payload.get("user_id")}
        return
    for key in _SENDER_STRINGS:
        if key in sender and not isinstance(sender[key], str):
            repairs.append(f"sender.{key} dropped")
            del sender[key]
    for key in _SENDER_INTS:
        if key in sender and not isinstance(sender[key], int):
            number = _as_int(sender[key])
            if number is None:
                repairs.append(f"sender.{key} dropped")
                del sender[key]
            else:
                sender[key] = number


# -- segments ------------------------------------------------------------------------------


def _clean_segments(message: Any, repairs: list[str]) -> Any:
    if isinstance(message, str):
        return message  # string format: the adapter parses CQ code itself
    if isinstance(message, dict):
        message = [message]
    if not isinstance(message, list):
        repairs.append("message that is not a segment list")
        return [_unreadable(message)]
    cleaned = []
    for segment in message:
        fixed = _clean_segment(segment)
        if fixed is None:
            repairs.append("unreadable segment")
            fixed = _unreadable(segment)
        cleaned.append(fixed)
    return cleaned


def _clean_segment(segment: Any) -> dict[str, Any] | None:
    if not isinstance(segment, dict):
        return None
    seg_type, data = segment.get("type"), segment.get("data", {})
    if data is None:
        data = {}
    if not isinstance(seg_type, str) or not seg_type or not isinstance(data, dict):
        return None
    if seg_type == "text":
        text = data.get("text", "")
        if isinstance(text, bool | int | float):
            text = str(text)
        if not isinstance(text, str):
            return None
        data = {**data, "text": text}
    return {"type": seg_type, "data": data}


def _unreadable(segment: Any) -> dict[str, Any]:
    return {"type": UNREADABLE_SEGMENT, "data": {"what": excerpt(repr(segment), 80)}}
