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

from pallas.core.numbers import PLATFORM_DIGITS, fits_platform, read_int
from pallas.core.text import excerpt

UNREADABLE_SEGMENT = "pallas_unreadable"  # the type given to a segment that could not be read
MAX_DEPTH = 40  # deeper containers become a placeholder (nested forwards stay well inside)
MAX_TIME = 253_402_300_799  # 9999-12-31: the last second a datetime can hold
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_CUT = "[…]"

# Top-level fields the adapter's models read as integers: required ones stay (a message
# without its ids is unreadable), optional ones go when they are not numbers.
_REQUIRED_INTS = ("self_id", "message_id", "user_id", "group_id")
_OPTIONAL_INTS = ("target_id", "real_id", "message_seq", "sender_id", "operator_id", "temp_source")
_MESSAGE_STRINGS = ("group_name", "message_format", "real_seq")
_SENDER_STRINGS = ("nickname", "card", "role", "sex", "area", "level", "title")
_SENDER_INTS = ("user_id", "age")


# The key naming an event's kind, for each post type; no other may be present.
_TYPE_KEYS = {"message_type", "notice_type", "request_type", "meta_event_type"}
_TYPE_KEY_OF = {
    "message": "message_type",
    "message_sent": "message_type",
    "notice": "notice_type",
    "request": "request_type",
    "meta_event": "meta_event_type",
}


def frame_self_id(payload: dict[str, Any]) -> str:
    """The bot account an event is for, as the models will read it (10000.0 is 10000)."""
    value = payload.get("self_id")
    number = _as_int(value)
    return str(number) if number is not None else str(value if value is not None else "")


@dataclass(frozen=True)
class CleanFrame:
    payload: dict[str, Any]
    repairs: tuple[str, ...]  # what was fixed, for the log; empty for a well-formed frame


def clean_event(payload: dict[str, Any], *, text: str, now_s: int) -> CleanFrame:
    """The payload (decoded from `text`) with its readable parts in the shapes the models
    expect. `now_s` stands in for a timestamp that cannot be one.

    The frame's text tells cheaply whether the costlier walks are needed: a lone surrogate can
    only come from a JSON escape, and nesting is bounded by the number of opening brackets.
    """
    repairs: list[str] = []
    if _ESCAPED_SURROGATE.search(text) and _fix_surrogates(payload):
        repairs.append("lone surrogates replaced")
    if text.count("{") + text.count("[") > MAX_DEPTH and _cut_deep(payload):
        repairs.append(f"parts nested over {MAX_DEPTH} levels cut")
    _fix_time(payload, now_s, repairs)
    _fix_ints(payload, repairs)
    post_type = payload.get("post_type")
    for key in _TYPE_KEYS - {_TYPE_KEY_OF.get(str(post_type), "")}:
        if key in payload:  # a second *_type key makes the model lookup refuse the event
            repairs.append(f"stray {key} dropped")
            del payload[key]
    if post_type in ("message", "message_sent"):
        _fix_message_envelope(payload, repairs)
        if "message" in payload:
            payload["message"] = _clean_segments(payload["message"], repairs)
    return CleanFrame(payload, tuple(repairs))


def flatten_deep_json(text: str, limit: int = MAX_DEPTH) -> str:
    """The JSON text with every container deeper than `limit` replaced by a placeholder
    string, for a frame too deep for the decoder. Iterative: strings are skipped whole, so a
    bracket inside a string never counts."""
    pieces: list[str] = []
    depth, kept_to, cut_from = 0, 0, -1
    for token in _JSON_TOKEN.finditer(text):
        mark = token.group()
        if mark in "[{":
            depth += 1
            if depth == limit + 1 and cut_from < 0:
                cut_from = token.start()
        elif mark in "]}":
            if depth == limit + 1 and cut_from >= 0:
                pieces += [text[kept_to:cut_from], f'"{_CUT}"']
                kept_to, cut_from = token.end(), -1
            depth -= 1
    pieces.append(text[kept_to:])
    return "".join(pieces)


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
    """An integer however it is spelled; None past PLATFORM_DIGITS digits (no id is that
    long, and a 5,000-digit string is no number, not an exception)."""
    number: int | None = None
    if isinstance(value, bool):
        number = int(value)
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        number = read_int(value, PLATFORM_DIGITS)
    return number if number is not None and fits_platform(number) else None


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
    seq = payload.get("real_seq")
    if isinstance(seq, int) and not isinstance(seq, bool):
        payload["real_seq"] = str(seq)  # QQ's sequence, a string in NapCat's own schema
    for key in _MESSAGE_STRINGS:
        if key in payload and not isinstance(payload[key], str):
            repairs.append(f"{key} dropped")
            del payload[key]
    if not isinstance(payload.get("sub_type"), str):
        payload["sub_type"] = "normal" if payload.get("message_type") == "group" else "friend"
    if not isinstance(payload.get("raw_message"), str):
        payload["raw_message"] = ""  # unused here, but the models require it
    if "message" not in payload:
        repairs.append("message missing")
        payload["message"] = []
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
    seg_type, data = segment.get("type"), segment.get("data")
    if not isinstance(seg_type, str) or not seg_type:
        return None
    if data is None:
        data = {}
    elif not isinstance(data, dict):
        return None
    if seg_type == "text" and not isinstance(data.get("text"), str):
        text = data.get("text", "")  # the upstream bot reads data["text"] unguarded
        if not isinstance(text, str | bool | int | float):
            return None
        data = {**data, "text": str(text)}
    if data is segment.get("data") and len(segment) == 2:
        return segment  # already well formed: no copy on the common path
    return {"type": seg_type, "data": data}


def _unreadable(segment: Any) -> dict[str, Any]:
    return {"type": UNREADABLE_SEGMENT, "data": {"what": excerpt(repr(segment), 80)}}
