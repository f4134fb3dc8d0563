"""Hypothesis strategies for OneBot frames: arbitrary JSON, serialization as NapCat does it
(lone surrogates escaped, bare Infinity, nesting built without recursion), what a readable
envelope promises, and damage done to the NapCat-shaped corpus frames."""

from __future__ import annotations

import copy
import itertools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from pallas.core.numbers import PLATFORM_DIGITS
from tests.support.napcat_corpus import load_corpus

SELF_ID = "10000"
NOW_S = 1_764_600_000  # the arrival time given to a frame whose own time is unusable
MAX_WARNING_LINES = 2
MAX_LINE_CHARS = 1_200


# -- arbitrary JSON ------------------------------------------------------------------------

LONE_SURROGATES = ("\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00")
HUGE_INTS = (2**31, 2**53 + 1, 2**63, 2**64, -(2**63) - 1, 10**30, 10**100)
AWKWARD_STRINGS = (
    "",
    "10000",
    "7000001",
    " 42 ",
    "-1",
    "1e3",
    "Infinity",
    "NaN",
    "[CQ:at,qq=10000]",
    "<r>not a tag</r>",
    "{}",
    "\n\r\t",
    "\u2028\x1c",
    "\U0001f600",
)

_texts = st.text(st.characters(exclude_categories=()), max_size=20)  # surrogates included
strings = st.one_of(
    _texts,
    st.sampled_from(AWKWARD_STRINGS),
    st.sampled_from(LONE_SURROGATES),
    st.builds(lambda a, s, b: a + s + b, _texts, st.sampled_from(LONE_SURROGATES), _texts),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from(HUGE_INTS),
    st.floats(),  # inf, -inf, nan and 1e308 included
    st.sampled_from([math.inf, -math.inf, math.nan, 7000001.0, 1e20]),
    strings,
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(strings, children, max_size=4)
    ),
    max_leaves=12,
)


def json_kind(value: Any) -> str:
    return "bool" if isinstance(value, bool) else type(value).__name__


def other_type(old: Any) -> st.SearchStrategy[Any]:
    """An arbitrary JSON value whose type differs from `old`'s."""
    return json_values.filter(lambda value: json_kind(value) != json_kind(old))


# -- serialization -------------------------------------------------------------------------


@dataclass(frozen=True)
class Deep:
    """A value nested `depth` levels; written as text, since json.dumps would recurse."""

    depth: int
    shape: str  # "list" or "dict"

    def json_text(self) -> str:
        if self.shape == "list":
            return "[" * self.depth + "]" * self.depth
        return '{"d":' * self.depth + "0" + "}" * self.depth


@dataclass(frozen=True)
class LongNumber:
    """An integer literal too long for int() (Python reads at most 4,300 digits); written as
    text, since json.dumps cannot write it either."""

    digits: int

    def json_text(self) -> str:
        return "9" * self.digits


# Digit counts past anything an id can be: 64-bit, then Python's int() limit and far past it.
LONG_DIGITS = (21, 4_301, 5_000, 100_000)
long_numbers = st.one_of(
    st.sampled_from(LONG_DIGITS).map(LongNumber),
    st.sampled_from(LONG_DIGITS).map(lambda digits: "9" * digits),
)

_DEEP_TOKEN = "__pallas_deep_{}__"
_RAW_SURROGATE = re.compile("[\ud800-\udfff]")


def serialize(value: Any, *, ascii_only: bool, as_bytes: bool) -> str | bytes:
    """The frame as NapCat writes it: lone surrogates always as \\uXXXX escapes.

    With `ascii_only` everything outside ASCII is escaped (json.dumps' default); without,
    text is written as is except lone surrogates (what JavaScript's JSON.stringify does).
    NaN and infinities are the bare tokens `NaN` / `Infinity`.
    """
    deep: list[Deep | LongNumber] = []

    def placeholder(obj: Any) -> str:
        if isinstance(obj, Deep | LongNumber):
            deep.append(obj)
            return _DEEP_TOKEN.format(len(deep) - 1)
        raise TypeError(f"not JSON: {obj!r}")

    text = json.dumps(value, ensure_ascii=ascii_only, default=placeholder)
    if not ascii_only:
        text = _RAW_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    for index, nested in enumerate(deep):
        text = text.replace(f'"{_DEEP_TOKEN.format(index)}"', nested.json_text(), 1)
    return text.encode("utf-8") if as_bytes else text


# -- what a readable envelope promises -----------------------------------------------------


def int_like(value: Any) -> int | None:
    """An integer however it is spelled (int, integral finite float, or a decimal string)
    that a platform id can be: at most 20 digits (a LongNumber literal is none)."""
    if isinstance(value, bool):
        return None
    integral = isinstance(value, float) and math.isfinite(value) and value.is_integer()
    digits = isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,30}", value) is not None
    if isinstance(value, int) or integral or digits:
        number = int(value)
        return number if abs(number) < 10**PLATFORM_DIGITS else None
    return None


@dataclass(frozen=True)
class Home:
    """Where a message must land: stream kind, its external ids (None: any), the message id."""

    kind: str
    external_ids: frozenset[str] | None
    platform_message_id: str


def expected_home(frame: Any) -> Home | None:
    """The stream and id of a message whose envelope is readable; None for any other frame."""
    if not isinstance(frame, dict) or frame.get("post_type") != "message":
        return None
    if int_like(frame.get("self_id")) != int(SELF_ID):
        return None
    message_id, user_id = int_like(frame.get("message_id")), int_like(frame.get("user_id"))
    if message_id is None or user_id is None:
        return None
    if frame.get("message_type") == "group":
        group_id = int_like(frame.get("group_id"))
        if group_id is None:
            return None
        return Home("group", frozenset({str(group_id)}), str(message_id))
    if frame.get("message_type") == "private":
        # The bot's own private message belongs to the chat with its recipient (target_id).
        peers = None if str(user_id) == SELF_ID else frozenset({str(user_id)})
        return Home("private", peers, str(message_id))
    return None


_message_ids = itertools.count(1_000_000_000)


def salt_message_id(frame: Any) -> None:
    """Give the frame a fresh message id, spelled as before, so examples do not collide; a
    fresh message has a fresh QQ sequence number too (the same one is the same message)."""
    if not isinstance(frame, dict) or "message_id" not in frame:
        return
    value, fresh = frame["message_id"], next(_message_ids)
    if isinstance(frame.get("real_seq"), str | int) and not isinstance(frame["real_seq"], bool):
        frame["real_seq"] = str(fresh)
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        frame["message_id"] = fresh if abs(value) < 2**53 else 10**30 + fresh
    elif isinstance(value, float) and math.isfinite(value) and abs(value) < 2**53:
        frame["message_id"] = float(fresh)
    elif isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]+\s*", value):
        frame["message_id"] = re.sub(r"[0-9]+", str(fresh), value, count=1)


# -- mutations of NapCat's frames ----------------------------------------------------------

PathKey = str | int
FramePath = tuple[PathKey, ...]

TIME_VALUES = st.one_of(
    st.sampled_from(
        [
            2**63,
            10**20,
            253_402_300_800,
            -1,
            0,
            -(2**63),
            1.5,
            1_764_500_000.0,
            "1764500000",
            "abc",
            "",
            None,
            True,
            math.inf,
            -math.inf,
            math.nan,
            1e300,
        ]
    ),
    other_type(0),
)
FILE_SIZES = st.sampled_from(
    [math.inf, -math.inf, math.nan, -1, "abc", "", "1e400", "-5", 10**30, True, None, [], {}]
)
# Python's json reads about 1000 levels at most, less the caller's stack depth.
DEPTHS = st.one_of(st.sampled_from([41, 50, 500, 950, 1000, 3000]), st.integers(50, 3000))
RENUMBERINGS = ("str", "float", "padded", "bool", "list", "negative", "decimal", "exponent")
SURROGATE_FIELDS = frozenset(
    {"text", "nickname", "card", "raw_message", "group_name", "title", "summary", "name"}
)


def renumbered(value: Any, how: str) -> Any:
    """The same number as `value`, spelled another way."""
    number = int_like(value)
    number = 0 if number is None else number
    spellings: dict[str, Callable[[], Any]] = {
        "str": lambda: str(number),
        "float": lambda: float(number),
        "padded": lambda: f" {number} ",
        "bool": lambda: bool(number),
        "list": lambda: [number],
        "negative": lambda: -number,
        "decimal": lambda: f"{number}.0",
        "exponent": lambda: f"{number}e0",
    }
    return spellings[how]()


@dataclass(frozen=True)
class Mutation:
    action: str  # "replace", "delete", "renumber" or "surrogate"
    path: FramePath
    value: Any = None

    def apply(self, frame: dict[str, Any]) -> None:
        parent: Any = frame
        for key in self.path[:-1]:
            if not _holds(parent, key):
                return
            parent = parent[key]
        key = self.path[-1]
        if self.action == "replace":
            if isinstance(parent, dict) or _holds(parent, key):
                parent[key] = self.value
            return
        if not _holds(parent, key):
            return
        if self.action == "delete":
            del parent[key]
        elif self.action == "renumber":
            parent[key] = renumbered(parent[key], self.value)
        elif self.action == "surrogate" and isinstance(parent[key], str):
            position, surrogate = self.value
            text = parent[key]
            position = min(position, len(text))
            parent[key] = text[:position] + surrogate + text[position:]


def _holds(container: Any, key: PathKey) -> bool:
    if isinstance(container, dict):
        return key in container
    return isinstance(container, list) and isinstance(key, int) and 0 <= key < len(container)


def _get(frame: Any, path: FramePath) -> Any:
    for key in path:
        frame = frame[key]
    return frame


def all_paths(frame: dict[str, Any]) -> list[FramePath]:
    paths: list[FramePath] = []
    stack: list[tuple[FramePath, Any]] = [((), frame)]
    while stack:
        path, node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            paths.append((*path, key))
            if isinstance(value, dict | list):
                stack.append(((*path, key), value))
    return sorted(paths, key=repr)


def mutations_of(frame: dict[str, Any]) -> st.SearchStrategy[Mutation]:
    """Every kind of damage the brief names, aimed at the places it can hurt."""
    paths = all_paths(frame)

    def replace_at(path: FramePath, values: st.SearchStrategy[Any]) -> st.SearchStrategy[Mutation]:
        return values.map(lambda value: Mutation("replace", path, value))

    options: list[st.SearchStrategy[Mutation]] = [
        st.sampled_from(paths).flatmap(lambda p: replace_at(p, other_type(_get(frame, p)))),
        st.sampled_from(paths).map(lambda p: Mutation("delete", p)),
        replace_at(("time",), TIME_VALUES),
        replace_at(("message",), json_values),
        replace_at(("extra",), st.builds(Deep, DEPTHS, st.just("dict"))),
    ]
    top = [p for p in paths if len(p) == 1]
    sender = [p for p in paths if len(p) == 2 and p[0] == "sender"]
    options.append(st.sampled_from(top + sender).flatmap(lambda p: replace_at(p, json_values)))
    numbers = [p for p in top + sender if int_like(_get(frame, p)) is not None]
    if numbers:
        options.append(st.sampled_from(numbers).flatmap(lambda p: replace_at(p, long_numbers)))
        options.append(
            st.builds(
                Mutation,
                st.just("renumber"),
                st.sampled_from(numbers),
                st.sampled_from(RENUMBERINGS),
            )
        )
    texts = [p for p in paths if isinstance(_get(frame, p), str)]
    focused = [p for p in texts if p[-1] in SURROGATE_FIELDS]
    for candidates in (texts, focused):
        if candidates:
            options.append(
                st.builds(
                    Mutation,
                    st.just("surrogate"),
                    st.sampled_from(candidates),
                    st.tuples(st.integers(0, 40), st.sampled_from(LONE_SURROGATES)),
                )
            )
    message = frame.get("message")
    if isinstance(message, list) and message:
        indexes = st.integers(0, len(message) - 1)
        data_keys = st.one_of(st.just("nested"), st.sampled_from(["text", "file", "id", "data"]))
        options += [
            indexes.flatmap(lambda i: replace_at(("message", i), json_values)),
            indexes.flatmap(lambda i: replace_at(("message", i, "type"), other_type(""))),
            indexes.flatmap(lambda i: replace_at(("message", i, "data"), other_type({}))),
            indexes.flatmap(lambda i: replace_at(("message", i, "data", "file_size"), FILE_SIZES)),
            st.builds(
                lambda i, key, value: Mutation("replace", ("message", i, "data", key), value),
                indexes,
                st.sampled_from(["id", "qq", "file_size"]),
                long_numbers,
            ),
            st.builds(
                lambda i, key, depth, shape: Mutation(
                    "replace", ("message", i, "data", key), Deep(depth, shape)
                ),
                indexes,
                data_keys,
                DEPTHS,
                st.sampled_from(["list", "dict"]),
            ),
        ]
        data_paths = [p for p in paths if len(p) == 4 and p[0] == "message" and p[2] == "data"]
        if data_paths:
            options.append(
                st.sampled_from(data_paths).flatmap(
                    lambda p: replace_at(p, other_type(_get(frame, p)))
                )
            )
    return st.one_of(options)


@dataclass(frozen=True)
class Case:
    name: str
    base: dict[str, Any]
    mutations: tuple[Mutation, ...]

    def build(self) -> dict[str, Any]:
        frame = copy.deepcopy(self.base)
        for mutation in self.mutations:
            mutation.apply(frame)
        return frame


CORPUS = [c for c in load_corpus() if c.name.startswith(("message_", "segment_", "notice_"))]


@st.composite
def napcat_cases(draw: st.DrawFn) -> Case:
    item = draw(st.sampled_from(CORPUS))
    count = draw(st.integers(0, 3))
    mutations = tuple(draw(mutations_of(item.frame)) for _ in range(count))
    return Case(item.name, item.frame, mutations)


# -- envelopes with arbitrary contents -----------------------------------------------------

ids = st.one_of(st.integers(0, 2**40), st.integers(0, 2**40).map(str), json_values)
segments = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.one_of(
                st.sampled_from(["text", "at", "reply", "image", "face", "file", "forward"]),
                json_values,
            ),
            "data": st.one_of(
                st.dictionaries(
                    st.one_of(st.sampled_from(["text", "qq", "id", "file", "content"]), strings),
                    json_values,
                    max_size=4,
                ),
                json_values,
            ),
        }
    ),
    json_values,
)
envelopes = st.fixed_dictionaries(
    {
        "post_type": st.one_of(
            st.just("message"),
            st.sampled_from(["message_sent", "notice", "request", "meta_event"]),
            json_values,
        ),
        "self_id": st.one_of(st.sampled_from([10000, "10000"]), json_values),
    },
    optional={
        "message_type": st.one_of(st.sampled_from(["group", "private"]), json_values),
        "notice_type": st.one_of(
            st.sampled_from(["group_recall", "friend_recall", "notify", "group_increase"]),
            json_values,
        ),
        "sub_type": st.one_of(st.sampled_from(["normal", "friend", "group", "poke"]), json_values),
        "message_id": ids,
        "user_id": ids,
        "group_id": ids,
        "target_id": ids,
        "operator_id": ids,
        "time": st.one_of(st.just(1_764_500_000), TIME_VALUES),
        "raw_message": st.one_of(strings, json_values),
        "font": json_values,
        "sender": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "user_id": ids,
                    "nickname": json_values,
                    "card": json_values,
                    "role": json_values,
                },
            ),
            json_values,
        ),
        "message": st.one_of(st.lists(segments, max_size=4), json_values),
        "group_name": json_values,
    },
)
