"""Shape the model's reply text once, before anything is stored or sent.

The conversation model writes free text. Before the platform, the history and the console see
it, this module:

1. removes protocol markup the model echoed (reasoning blocks, vendor tool-call blocks,
   special tokens, `<say>`/`<reply>` wrappers, message-id and speaker prefixes copied from the
   transcript);
2. takes inline intent markers (`[表情:开心]`, `<mood>…</mood>`) out of the text and returns
   them as intents, which the caller records as events;
3. caps the visible text so a runaway model cannot flood a group;
4. splits the text into chat bubbles, the unit every consumer uses.

Pure functions, no I/O. Every pattern is linear on its input (no nested quantifiers, bounded
or class-limited runs anchored on a literal), so a megabyte of garbage stays cheap.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise

MAX_INTENT_CHARS = 40
MAX_INTENTS = 8  # a flood of markers must not become a flood of events
LONG_LINE_CHARS = 60  # longer lines are split further at sentence ends
TINY_CHARS = 4  # sentence-split fragments shorter than this join their neighbour

# Whitespace plus invisible characters that can make a bubble look empty.
_BLANK = " \t\n\r\f\v\u3000\u00a0\u200b\u200c\u200d\u2060\ufeff"
_DROPPED_INVISIBLE = str.maketrans("", "", "\u200b\u2060\ufeff")


class IntentKind(StrEnum):
    STICKER = "sticker"  # the model wants a sticker expressing this emotion/meaning
    MOOD = "mood"  # the model declares its mood
    PROMISE = "promise"  # the model promises to do something (kept only for owners)
    OFFENCE = "offence"  # the model judges the batch an attack on it


class RemovedKind(StrEnum):
    """Kinds of text removed while shaping, for the audit event (values are plain strings)."""

    THINK_BLOCK = "think_block"
    TOOL_MARKUP = "tool_markup"
    SPECIAL_TOKEN = "special_token"
    WRAPPER_TAG = "wrapper_tag"
    INTENT_RESIDUE = "intent_residue"
    MESSAGE_ID_PREFIX = "message_id_prefix"
    SPEAKER_PREFIX = "speaker_prefix"
    TRUNCATED = "truncated"


@dataclass(frozen=True)
class Intent:
    kind: IntentKind
    value: str  # trimmed, at most MAX_INTENT_CHARS


@dataclass(frozen=True)
class ShapedReply:
    text: str  # visible text after cleaning (bubbles joined by "\n")
    bubbles: tuple[str, ...]  # what is sent, in order; empty when nothing visible is left
    intents: tuple[Intent, ...]  # in order of appearance
    removed: tuple[str, ...]  # RemovedKind values, in pipeline order, each at most once

    @property
    def empty(self) -> bool:
        return not self.bubbles


# A cleaning step and the kind it records when it changed the text.
_Step = tuple[RemovedKind, Callable[[str], str]]

# --- intent markers -------------------------------------------------------------------------

_KINDS = {
    "表情": IntentKind.STICKER,
    "表情包": IntentKind.STICKER,
    "贴纸": IntentKind.STICKER,
    "sticker": IntentKind.STICKER,
    "emoji": IntentKind.STICKER,
    "心情": IntentKind.MOOD,
    "mood": IntentKind.MOOD,
    "承诺": IntentKind.PROMISE,
    "promise": IntentKind.PROMISE,
    "冒犯": IntentKind.OFFENCE,
    "offence": IntentKind.OFFENCE,
}
_BRACKET_KEYS = r"表情包|表情|贴纸|sticker|emoji|心情|mood|承诺|promise|冒犯|offence"
_TAG_KEYS = r"emoji|sticker|mood|promise|offence|表情|心情|承诺|冒犯"
# A value never crosses a bracket, an angle bracket or a line: that keeps each attempt short
# and lets the inner half of a nested marker match first.
_VALUE = r"[^<>\[\]【】\n]*"
_OPEN_END = r"(?=[<>\[\]【】\n])|\Z"  # an unclosed marker ends where its value ends
_INTENT = re.compile(
    rf"(?:[\[【][ \t]*(?P<bkey>{_BRACKET_KEYS})[ \t]*[:：](?P<bval>{_VALUE})"
    rf"(?:(?P<bclose>[\]】])|{_OPEN_END})"
    rf"|<[ \t]*(?P<tkey>{_TAG_KEYS})[ \t]*>(?P<tval>{_VALUE})"
    rf"(?:(?P<tclose></[ \t]*(?:{_TAG_KEYS})[ \t]*>)|{_OPEN_END}))"
    r"(?P<trail>[ \t])?",
    re.IGNORECASE,
)
_INTENT_RESIDUE = re.compile(
    rf"</?[ \t]*(?:{_TAG_KEYS})[ \t]*/?>|[\[【][ \t]*(?:{_BRACKET_KEYS})[ \t]*[:：]",
    re.IGNORECASE,
)
_NESTING_PASSES = 3

# --- protocol markup ------------------------------------------------------------------------

_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_UP_TO_LAST_THINK_CLOSE = re.compile(r".*</think(?:ing)?>", re.IGNORECASE | re.DOTALL)
_TOOL_OPEN = re.compile(
    r"<(?P<xml>tool_calls?|tool_result|tool_response|function_calls?|function_results|invoke)"
    r"\b[^<>\n]{0,300}>"
    r"|<[|｜]DSML[|｜](?P<dsml>function_calls|invoke)\b[^<>\n]{0,300}>"
    r"|<[|｜](?P<vendor>tool[▁_]calls?(?:[▁_]section)?)[▁_]begin[|｜]>",
    re.IGNORECASE,
)
_DSML_TAG = re.compile(r"</?[|｜]DSML[|｜][^<>\n]{0,300}>", re.IGNORECASE)
_SPECIAL_TOKEN = re.compile(r"<[|｜][^<>|｜\n]{1,80}[|｜]>")
_WRAPPER_TAG = re.compile(r"</?[ \t]*(?:say|reply|response|answer)\b[^<>\n]{0,100}>", re.I)
_MESSAGE_ID_PREFIX = re.compile(
    r"^[ \t]*(?:\[#\d{1,12}\][ \t]*[:：]?|【#\d{1,12}】[ \t]*[:：]?|#\d{1,12}[ \t]*[:：])[ \t]*",
    re.MULTILINE,
)
# An optional "(你)" style qualifier: the transcript shows the bot's own lines as "名字（你）".
_SPEAKER_TAIL = r"(?:[ \t]*[(（][^()（）\n]{0,40}[)）])?[ \t]*[:：][ \t]*"

# --- bubbles --------------------------------------------------------------------------------

# Spans a sentence split must not enter, and sentence ends. Each span stops at its own opener,
# so an unbalanced quote costs one short scan, never a quadratic one.
_SENTENCE_SCAN = re.compile(
    r"(?P<skip>https?://[!-~]*|www\.[!-~]*|`[^`\n]*`"
    r"|「[^「」\n]*」|『[^『』\n]*』|“[^“”\n]*”|（[^（）\n]*）|\([^()\n]*\))"
    r"|(?P<end>(?:[。！？!?…]|\.{3,})+[”’」』）)]*)",
    re.IGNORECASE,
)
_CUT_AT = "。！？!?…\n"
_BLANK_LINES = re.compile(r"\n{3,}")
_FENCE = "```"


def shape_reply(
    raw: str, *, bot_names: Sequence[str] = (), max_bubbles: int = 4, max_chars: int = 1500
) -> ShapedReply:
    """Clean the model's reply, take out its intents, cap it and split it into bubbles."""
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    removed: list[RemovedKind] = []
    text = raw.replace("\r\n", "\n").replace("\r", "\n").translate(_DROPPED_INVISIBLE)
    text = _apply(text, _protocol_steps(), removed)
    text, intents = _take_intents(text)
    text = _apply(text, _residue_steps(bot_names), removed)
    text, cut = _cap(_tidy(text), max_chars)
    if cut:
        removed.append(RemovedKind.TRUNCATED)
    bubbles = split_into_bubbles(text, max_bubbles=max_bubbles)
    return ShapedReply(
        text="\n".join(bubbles),
        bubbles=bubbles,
        intents=intents,
        removed=tuple(dict.fromkeys(removed)),
    )


def split_into_bubbles(text: str, *, max_bubbles: int = 4) -> tuple[str, ...]:
    """Split text into chat bubbles.

    Each non-empty line is a bubble; a line longer than LONG_LINE_CHARS is cut at sentence ends
    (never inside a URL, a code span, quotes or brackets), sentences packed back up to that
    length. A fenced code block is one bubble, kept verbatim. One trailing "。" is dropped from
    a bubble, as people do in chat ("。。" and other punctuation stay).

    Beyond `max_bubbles`, the tail is merged into the last bubble: lines are joined with a single
    space (a bubble stays one line), pieces of one split line are rejoined as written, and a
    code block keeps a line break on each side because its fences need their own line.
    """
    if max_bubbles < 1:
        raise ValueError("max_bubbles must be at least 1")
    pieces: list[_Piece] = []
    for unit, is_code in _units(text):
        if is_code:
            pieces.append(_Piece(unit, code=True))
        else:
            pieces.extend(_line_pieces(unit))
    if len(pieces) > max_bubbles:
        pieces[max_bubbles - 1 :] = [_joined(pieces[max_bubbles - 1 :])]
    return tuple(piece.text if piece.code else _drop_final_period(piece.text) for piece in pieces)


# --- cleaning steps -------------------------------------------------------------------------


def _apply(text: str, steps: Sequence[_Step], removed: list[RemovedKind]) -> str:
    for kind, step in steps:
        cleaned = step(text)
        if cleaned != text:
            removed.append(kind)
            text = cleaned
    return text


def _protocol_steps() -> tuple[_Step, ...]:
    # Reasoning first: anything inside it (tool calls, markers) is not part of the reply.
    return (
        (RemovedKind.THINK_BLOCK, _drop_think),
        (RemovedKind.TOOL_MARKUP, lambda t: _drop_blocks(t, _TOOL_OPEN, _tool_close)),
        (RemovedKind.TOOL_MARKUP, lambda t: _DSML_TAG.sub("", t)),
        (RemovedKind.SPECIAL_TOKEN, lambda t: _SPECIAL_TOKEN.sub("", t)),
        (RemovedKind.WRAPPER_TAG, lambda t: _WRAPPER_TAG.sub("", t)),
    )


def _residue_steps(bot_names: Sequence[str]) -> tuple[_Step, ...]:
    # After the intents, so a line opening with a marker still counts as a line start.
    steps: list[_Step] = [
        (RemovedKind.INTENT_RESIDUE, lambda t: _INTENT_RESIDUE.sub("", t)),
        (RemovedKind.MESSAGE_ID_PREFIX, lambda t: _MESSAGE_ID_PREFIX.sub("", t)),
    ]
    names = sorted({n.strip() for n in bot_names if n.strip()}, key=len, reverse=True)
    if names:
        alternatives = "|".join(re.escape(n) for n in names)
        speaker = re.compile(rf"^[ \t]*(?:{alternatives}){_SPEAKER_TAIL}", re.M | re.I)
        steps.append((RemovedKind.SPEAKER_PREFIX, lambda t: speaker.sub("", t)))
    return tuple(steps)


def _drop_blocks(
    text: str, opener: re.Pattern[str], closer_for: Callable[[re.Match[str]], re.Pattern[str]]
) -> str:
    """Remove opener…closer blocks; an unclosed block runs to the end of the text."""
    kept: list[str] = []
    pos = 0
    while (start := opener.search(text, pos)) is not None:
        kept.append(text[pos : start.start()])
        end = closer_for(start).search(text, start.end())
        if end is None:
            pos = len(text)
            break
        pos = end.end()
    kept.append(text[pos:])
    return "".join(kept)


def _tool_close(start: re.Match[str]) -> re.Pattern[str]:
    if start.group("xml"):
        return re.compile(rf"</[ \t]*{re.escape(start.group('xml'))}[ \t]*>", re.IGNORECASE)
    if start.group("dsml"):
        return re.compile(rf"</[|｜]DSML[|｜]{re.escape(start.group('dsml'))}>", re.IGNORECASE)
    return re.compile(rf"<[|｜]{re.escape(start.group('vendor'))}[▁_]end[|｜]>", re.IGNORECASE)


def _drop_think(text: str) -> str:
    text = _drop_blocks(text, _THINK_OPEN, lambda _: _THINK_CLOSE)
    # Some providers strip the opening tag: everything before a stray closer is reasoning.
    stray = _UP_TO_LAST_THINK_CLOSE.match(text)
    return text if stray is None else text[stray.end() :]


def take_intents(text: str) -> tuple[str, tuple[Intent, ...]]:
    """The intent markers in `text` (a silent decision's reason, say), and the text without."""
    return _take_intents(text)


def _take_intents(text: str) -> tuple[str, tuple[Intent, ...]]:
    found: list[Intent] = []

    def replace(match: re.Match[str]) -> str:
        bracket = match.group("bkey") is not None
        key = match.group("bkey") if bracket else match.group("tkey")
        value = _intent_value(match.group("bval") if bracket else match.group("tval"))
        closed = match.group("bclose" if bracket else "tclose") is not None
        if not value and not closed:
            return match.group(0)  # maybe the outer half of a nested marker: next pass
        if value and len(found) < MAX_INTENTS:
            found.append(Intent(_KINDS[key.casefold()], value))
        return _gap(match)

    # Inner markers go first; the emptied outer shell matches on the next pass.
    for _ in range(_NESTING_PASSES):
        cleaned = _INTENT.sub(replace, text)
        if cleaned == text:
            break
        text = cleaned
    return text, tuple(found)


def _intent_value(raw: str) -> str:
    return raw.strip(_BLANK)[:MAX_INTENT_CHARS].strip(_BLANK)


def _gap(match: re.Match[str]) -> str:
    """Keep one space where the marker sat between two spaced words, none otherwise."""
    before = match.string[match.start() - 1] if match.start() else "\n"
    return "" if before in " \t\n" else match.group("trail") or ""


def _tidy(text: str) -> str:
    # Per-line rstrip instead of a "[ \t]+$" pattern, which is quadratic on long space runs.
    lines = "\n".join(line.rstrip() for line in text.split("\n"))
    return _BLANK_LINES.sub("\n\n", lines).strip(_BLANK)


def _cap(text: str, max_chars: int) -> tuple[str, bool]:
    """Cut to max_chars, on a sentence end in the second half if there is one, ending in "…"."""
    if len(text) <= max_chars:
        return text, False
    head = text[: max_chars - 1]
    boundary = max(head.rfind(mark) for mark in _CUT_AT)
    if boundary >= len(head) // 2:
        head = head[: boundary + 1]
    head = head.rstrip(_BLANK).rstrip("。，,、；;：:").rstrip(_BLANK)
    return (head if head.endswith("…") else head + "…"), True


# --- bubbles --------------------------------------------------------------------------------


def _units(text: str) -> Iterator[tuple[str, bool]]:
    """Lines, and fenced code blocks as single units (an unclosed fence runs to the end)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(lines):
        head = lines[i].strip(_BLANK)
        if not head.startswith(_FENCE) or (len(head) > 6 and head.endswith(_FENCE)):
            yield head, head.startswith(_FENCE)  # a line, or a one-line ```code```
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].strip(_BLANK).startswith(_FENCE):
            end += 1
        body = lines[i + 1 : end]
        if any(line.strip(_BLANK) for line in body):
            yield "\n".join(line.rstrip() for line in lines[i : end + 1]).strip(_BLANK), True
        i = end + 1


@dataclass(frozen=True)
class _Piece:
    text: str
    code: bool = False
    joiner: str | None = None  # set on a later piece of a split line: what separated it


def _line_pieces(line: str) -> list[_Piece]:
    text = line.strip(_BLANK)
    if not _drop_final_period(text):  # blank, or a lone "。"
        return []
    if len(text) <= LONG_LINE_CHARS:
        return [_Piece(text)]
    pieces: list[_Piece] = []
    for a, b in _merge_tiny(text, _pack(_sentence_ranges(text))):
        piece = text[a:b].strip(_BLANK)
        joiner = " " if text[a] in _BLANK else ""
        pieces.append(_Piece(piece, joiner=joiner if pieces else None))
    return pieces


def _sentence_ranges(text: str) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_SCAN.finditer(text):
        if match.group("end") is not None and match.end() < len(text):
            ranges.append((start, match.end()))
            start = match.end()
    ranges.append((start, len(text)))
    return ranges


def _pack(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    # Sentences are packed back together up to the line limit: a bubble per sentence would
    # make short sentences look like stutter.
    chunks: list[tuple[int, int]] = []
    for a, b in ranges:
        if chunks and b - chunks[-1][0] <= LONG_LINE_CHARS:
            chunks[-1] = (chunks[-1][0], b)
        else:
            chunks.append((a, b))
    return chunks


def _merge_tiny(text: str, chunks: list[tuple[int, int]]) -> list[tuple[int, int]]:
    def tiny(chunk: tuple[int, int]) -> bool:
        return len(text[chunk[0] : chunk[1]].strip(_BLANK)) < TINY_CHARS

    merged: list[tuple[int, int]] = []
    for chunk in chunks:
        if merged and tiny(chunk):
            merged[-1] = (merged[-1][0], chunk[1])
        else:
            merged.append(chunk)
    if len(merged) > 1 and tiny(merged[0]):  # a leading fragment has no previous: join the next
        merged[:2] = [(merged[0][0], merged[1][1])]
    return merged


def _drop_final_period(bubble: str) -> str:
    if bubble.endswith("。") and not bubble.endswith("。。"):
        return bubble[:-1].rstrip(_BLANK)
    return bubble


def _joined(tail: list[_Piece]) -> _Piece:
    text = tail[0].text
    for previous, piece in pairwise(tail):
        if piece.joiner is not None:  # the rest of the same line: as the model wrote it
            text += piece.joiner + piece.text
        elif previous.code or piece.code:
            text += "\n" + piece.text
        else:  # a new line: its own bubble would have lost its final "。" too
            text = _drop_final_period(text) + " " + piece.text
    return _Piece(text, code=tail[-1].code)
