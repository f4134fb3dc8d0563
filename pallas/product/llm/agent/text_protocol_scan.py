"""Low-level scanning for the text tool protocol: fences, vendor markup, brackets, strings.

Model output can be anything (100 KB of garbage, brackets nested 10,000 deep), so scanning
jumps between interesting characters with simple regexes, never backtracks much, and gives up
on a region after a few groups that never close. Nothing here raises on any input.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise

# Opening quote -> closing quote. Full-width pairs are common in Chinese model output.
QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’", "「": "」", "『": "』"}
_OPEN_BRACKETS = "([{（【"
_CLOSE_BRACKETS = ")]}）】"
_SEPARATORS = ",，"
# A quote opens a string only where a value can start, so an apostrophe in bare text is text.
_VALUE_STARTERS = frozenset("([{,=:;（【，＝：；")
# A quote closes a string only before what may follow a value, so an unescaped quote inside
# Chinese text (text="他说"好"吧") does not cut the string short.
_VALUE_FOLLOWERS = frozenset(")]},:;=）】，：；＝")
_INTERESTING = re.compile(
    "[" + re.escape(_OPEN_BRACKETS + _CLOSE_BRACKETS + _SEPARATORS + "".join(QUOTES)) + "]"
)
_STRING_STOPS = {q: re.compile("[\\\\" + re.escape(c) + "]") for q, c in QUOTES.items()}
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_ESCAPED = {"n": "\n", "t": "\t", "r": "\r"}
# Unclosed groups scan to the end of their region; a few tries keep the total work linear.
MAX_FAILED_SCANS = 4
_MAX_PYTHON_LITERAL = 20_000

# Vendor tool-call markup: Hermes/Qwen <tool_call>, Anthropic <function_calls>/<invoke>,
# DeepSeek DSML tags and <｜tool▁calls▁begin｜> tokens, Llama <function=name>.
_DSML = r"(?:[|｜]\s*DSML\s*[|｜]\s*)?"
_MARKUP_OPEN = re.compile(
    r"<\s*" + _DSML + r"(?P<tag>tool_calls?|function_calls|invoke)\b[^<>]{0,300}>"
    r"|<\s*function\s*=[^<>]{0,300}>"
    r"|<[|｜]\s*tool[▁_ ]?(?P<ds>calls?)[▁_ ]?begin\s*[|｜]>"
)
_TAG_CLOSERS = {
    tag: re.compile(r"<\s*/\s*" + _DSML + tag + r"\s*>")
    for tag in ("tool_call", "tool_calls", "function_calls", "invoke")
}
_FUNCTION_CLOSER = re.compile(r"<\s*/\s*function\s*>")
_DEEPSEEK_CLOSERS = {
    plural: re.compile(r"<[|｜]\s*tool[▁_ ]?" + plural + r"[▁_ ]?end\s*[|｜]>")
    for plural in ("call", "calls")
}
_INVOKE_OPEN = re.compile(
    r"<\s*" + _DSML + r"(?:invoke|function)(?:\s+name\s*=\s*|\s*=\s*)[\"']?"
    r"([^\"'<>\s]{1,80}+)[\"']?[^<>]{0,300}>"
)
_PARAM_OPEN = re.compile(
    r"<\s*" + _DSML + r"parameter(?:\s+name\s*=\s*|\s*=\s*)[\"']?"
    r"([^\"'<>\s]{1,80}+)[\"']?[^<>]{0,300}>"
)
_PARAM_CLOSE = re.compile(r"<\s*/\s*" + _DSML + r"parameter\s*>")
_STRAY_MARKUP = re.compile(
    r"<\s*/?\s*"
    + _DSML
    + r"(?:tool_calls?|function_calls|invoke|parameter|function)\b[^<>]{0,300}>"
    r"|<[|｜][^<>|｜\n]{1,60}[|｜]>"
    r"|\[TOOL_CALLS\]"
)
_LANGUAGE_TAG = re.compile(r"[\w+#.-]*")
# Keys under which JSON-shaped calls carry the function name and the arguments.
_NAME_KEYS = ("name", "action", "function", "tool", "tool_name", "function_name")
_ARGUMENT_KEYS = ("arguments", "args", "parameters", "params", "input", "kwargs")
_WRAPPER_KEYS = ("function", "tool_calls", "calls", "actions")
_MAX_JSON_DEPTH = 4


class ScanFailure(StrEnum):
    UNCLOSED = "unclosed"
    UNTERMINATED_STRING = "unterminated_string"


class SegmentKind(StrEnum):
    PROSE = "prose"
    CODE = "code"
    MARKUP = "markup"


@dataclass(frozen=True)
class Segment:
    kind: SegmentKind
    raw: str  # exactly as written, fences and tags included
    body: str  # the code between the fences; equal to raw for prose and markup


@dataclass(frozen=True)
class Group:
    end: int  # index just past the closing bracket
    separators: tuple[int, ...]  # indices of the top-level commas


@dataclass(frozen=True)
class Chunk:
    separator: str  # the comma before this argument ("" for the first one)
    text: str


@dataclass(frozen=True)
class RawCall:
    """A call as found, before its arguments are checked against the function's parameters."""

    name: str
    start: int
    end: int
    chunks: tuple[Chunk, ...] = ()  # a text call's arguments, split at top-level commas
    mapping: Mapping[object, object] | None = None  # arguments already structured (JSON, XML)
    failure: ScanFailure | None = None


@dataclass(frozen=True)
class Vocabulary:
    names: frozenset[str]
    opener: re.Pattern[str]  # a known name followed by "(", or a "{" that may start JSON
    word: re.Pattern[str]  # a known name as a whole word


def vocabulary(names: Collection[str]) -> Vocabulary:
    # Longest first so that a name never shadows a longer one sharing its prefix.
    ordered = sorted(names, key=len, reverse=True)
    alternation = "|".join(re.escape(name) for name in ordered) or "(?!)"
    return Vocabulary(
        frozenset(names),
        # An optional qualifier is part of the call: functions.reply(...)
        re.compile(
            rf"(?<![A-Za-z0-9_])(?:[A-Za-z_][A-Za-z0-9_]*\.)?(?P<name>{alternation})\s*[(（]"
            r"|(?P<brace>\{)"
        ),
        re.compile(rf"(?<![A-Za-z0-9_])(?:{alternation})(?![A-Za-z0-9_])"),
    )


def _opens_string(text: str, index: int) -> bool:
    before = index - 1
    while before >= 0 and text[before].isspace():
        before -= 1
    return before < 0 or text[before] in _VALUE_STARTERS


def _closes_string(text: str, after: int) -> bool:
    # The end of a line closes too: a call that lost its ")" must not swallow the next line.
    while after < len(text) and text[after] in " \t":
        after += 1
    return after >= len(text) or text[after] in _VALUE_FOLLOWERS or text[after] in "\r\n"


def skip_string(text: str, start: int) -> int | None:
    """The index just past the string opened at `start`, or None when it never closes."""
    stops = _STRING_STOPS[text[start]]
    position = start + 1
    while (match := stops.search(text, position)) is not None:
        found = match.start()
        if text[found] == "\\":
            position = found + 2
        elif _closes_string(text, found + 1):
            return found + 1
        else:
            position = found + 1
    return None


def decode_string(literal: str) -> str:
    """The value of a quoted literal (quotes included): escapes \\" \\n \\\\ decoded."""
    return _ESCAPE.sub(_unescape, literal[1:-1])


def _unescape(match: re.Match[str]) -> str:
    char = match[1]
    if char in _ESCAPED:
        return _ESCAPED[char]
    # \" \' \\ give the character; an unknown letter escape (\d) stays as written.
    return match[0] if char.isalnum() else char


def scan_group(text: str, start: int) -> Group | ScanFailure:
    """Find the bracket closing the one at `start`, skipping strings; kinds are not matched."""
    depth = 0
    separators: list[int] = []
    position = start
    while (match := _INTERESTING.search(text, position)) is not None:
        found = match.start()
        char = text[found]
        position = found + 1
        if char in _OPEN_BRACKETS:
            depth += 1
        elif char in _CLOSE_BRACKETS:
            depth -= 1
            if depth == 0:
                return Group(position, tuple(separators))
        elif char in _SEPARATORS:
            if depth == 1:
                separators.append(found)
        elif _opens_string(text, found):
            end = skip_string(text, found)
            if end is None:
                return ScanFailure.UNTERMINATED_STRING
            position = end
    return ScanFailure.UNCLOSED


def split_segments(text: str, fences: bool = True) -> list[Segment]:
    """Cut text into prose, fenced code blocks and vendor markup, in order."""
    segments: list[Segment] = []
    position = 0
    fence = text.find("```") if fences else -1
    markup = _MARKUP_OPEN.search(text)
    while fence >= 0 or markup is not None:
        if markup is None or 0 <= fence < markup.start():
            start, (segment, end) = fence, _read_fence(text, fence)
        else:
            start, (segment, end) = markup.start(), _read_markup(text, markup)
        if start > position:
            segments.append(Segment(SegmentKind.PROSE, text[position:start], text[position:start]))
        segments.append(segment)
        position = end
        # Cached look-ahead: searching again only when passed keeps this linear.
        if 0 <= fence < position:
            fence = text.find("```", position)
        if markup is not None and markup.start() < position:
            markup = _MARKUP_OPEN.search(text, position)
    if position < len(text):
        segments.append(Segment(SegmentKind.PROSE, text[position:], text[position:]))
    return segments


def _read_fence(text: str, start: int) -> tuple[Segment, int]:
    run_end = start
    while run_end < len(text) and text[run_end] == "`":
        run_end += 1
    line_end = text.find("\n", run_end)
    info = text[run_end : line_end if line_end >= 0 else len(text)]
    body_start = run_end  # inline: ```reply(text="hi")```
    if _LANGUAGE_TAG.fullmatch(info.strip()):
        body_start = line_end + 1 if line_end >= 0 else len(text)
    close = text.find(text[start:run_end], body_start)
    if close < 0:  # the model forgot the closing fence: the block runs to the end
        return Segment(SegmentKind.CODE, text[start:], text[body_start:]), len(text)
    end = close + run_end - start
    while end < len(text) and text[end] == "`":
        end += 1
    return Segment(SegmentKind.CODE, text[start:end], text[body_start:close]), end


def _read_markup(text: str, match: re.Match[str]) -> tuple[Segment, int]:
    if match["tag"]:
        closer = _TAG_CLOSERS[match["tag"]]
    elif match["ds"]:
        closer = _DEEPSEEK_CLOSERS[match["ds"]]
    else:
        closer = _FUNCTION_CLOSER
    close = closer.search(text, match.end())
    end = close.end() if close is not None else len(text)
    raw = text[match.start() : end]
    return Segment(SegmentKind.MARKUP, raw, raw), end


def strip_stray_markup(text: str) -> tuple[str, bool]:
    """Remove leftover tool-call tags and special tokens; report whether there were any."""
    cleaned, count = _STRAY_MARKUP.subn("", text)
    return cleaned, count > 0


def scan_region(text: str, vocab: Vocabulary) -> list[RawCall]:
    """Text calls `name(...)` and JSON-shaped calls of known functions, in order."""
    calls: list[RawCall] = []
    failures = 0
    position = 0
    while failures < MAX_FAILED_SCANS and (match := vocab.opener.search(text, position)):
        if match["name"] is not None:
            found, position, failed = _text_call(text, match)
        else:
            found, position, failed = _json_calls(text, match.start(), vocab)
        calls += found
        failures += failed
    return calls


def _text_call(text: str, match: re.Match[str]) -> tuple[list[RawCall], int, bool]:
    paren = match.end() - 1
    group = scan_group(text, paren)
    if isinstance(group, ScanFailure):
        failed = RawCall(match["name"], match.start(), len(text), failure=group)
        return [failed], paren + 1, True
    bounds = (paren, *group.separators, group.end - 1)
    chunks = tuple(
        Chunk(text[left] if index else "", text[left + 1 : right])
        for index, (left, right) in enumerate(pairwise(bounds))
    )
    return [RawCall(match["name"], match.start(), group.end, chunks=chunks)], group.end, False


def _json_calls(text: str, start: int, vocab: Vocabulary) -> tuple[list[RawCall], int, bool]:
    group = scan_group(text, start)
    if isinstance(group, ScanFailure):
        return [], start + 1, True
    shapes = call_shapes(load_literal(text[start : group.end]), vocab.names)
    # JSON in a code block may just be data: only known names make it a call.
    calls = [RawCall(n, start, group.end, mapping=a) for n, a in shapes if n in vocab.names]
    return calls, group.end, False


def load_literal(text: str) -> object:
    """JSON, else a Python literal (single quotes, True/None); None when neither parses."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    if len(text) > _MAX_PYTHON_LITERAL:
        return None
    try:
        with warnings.catch_warnings():  # invalid escapes in model text warn on parsing
            warnings.simplefilter("ignore")
            return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None


def call_shapes(
    value: object, names: Collection[str], depth: int = 0
) -> list[tuple[str, Mapping[object, object]]]:
    """Calls in a JSON value: {"name": .., "arguments": {..}}, {"action": .., ...}, OpenAI."""
    if depth > _MAX_JSON_DEPTH:
        return []
    if isinstance(value, list):
        return [shape for item in value for shape in call_shapes(item, names, depth + 1)]
    if not isinstance(value, dict):
        return []
    for key in _WRAPPER_KEYS:
        if isinstance(value.get(key), dict | list):
            return call_shapes(value[key], names, depth + 1)
    keys = [k for k in _NAME_KEYS if isinstance(value.get(k), str)]
    name_key = next((k for k in keys if value[k] in names), keys[0] if keys else None)
    if name_key is None:
        return []
    return [(value[name_key], _arguments_of(value, name_key))]


def _arguments_of(value: dict[object, object], name_key: str) -> Mapping[object, object]:
    for key in _ARGUMENT_KEYS:
        if key in value:
            arguments = value[key]
            if isinstance(arguments, str):  # OpenAI sends arguments as a JSON string
                arguments = load_literal(arguments)
            return arguments if isinstance(arguments, dict) else {}
    return {k: v for k, v in value.items() if k not in (name_key, "type", "id")}


def markup_calls(raw: str, vocab: Vocabulary) -> list[RawCall]:
    """Calls inside vendor markup; names may be unknown (the caller reports them)."""
    invokes = list(_INVOKE_OPEN.finditer(raw))
    if not invokes:
        return _named_json_calls(raw, vocab)
    ends = [match.start() for match in invokes[1:]] + [len(raw)]
    return [
        RawCall(match[1], 0, len(raw), mapping=_invoke_arguments(raw[match.end() : end], vocab))
        for match, end in zip(invokes, ends, strict=True)
    ]


def _invoke_arguments(content: str, vocab: Vocabulary) -> Mapping[object, object]:
    parameters = _xml_parameters(content)
    if parameters:
        return parameters
    brace = content.find("{")  # Llama style: <function=reply>{"text": "..."}</function>
    group = scan_group(content, brace) if brace >= 0 else ScanFailure.UNCLOSED
    if isinstance(group, ScanFailure):
        return {}
    value = load_literal(content[brace : group.end])
    shapes = call_shapes(value, vocab.names)
    if shapes:
        return shapes[0][1]
    return value if isinstance(value, dict) else {}


def _xml_parameters(content: str) -> dict[object, object]:
    parameters: dict[object, object] = {}
    position = 0
    while (opener := _PARAM_OPEN.search(content, position)) is not None:
        closer = _PARAM_CLOSE.search(content, opener.end())
        if closer is None:  # no closing tag anywhere after: the value runs to the next tag
            value = content[opener.end() :].split("<", 1)[0].strip()
            parameters.update({opener[1]: value} if value else {})
            break
        parameters[opener[1]] = content[opener.end() : closer.start()].strip()
        position = closer.end()
    return parameters


def _named_json_calls(raw: str, vocab: Vocabulary) -> list[RawCall]:
    """JSON objects in markup; a bare arguments object takes the known name written before it
    (DeepSeek: `function<｜tool▁sep｜>reply` then ```json {...}```)."""
    calls: list[RawCall] = []
    position = last_end = failures = 0
    while failures < MAX_FAILED_SCANS and (brace := raw.find("{", position)) >= 0:
        group = scan_group(raw, brace)
        if isinstance(group, ScanFailure):
            failures += 1
            position = brace + 1
            continue
        value = load_literal(raw[brace : group.end])
        shapes = call_shapes(value, vocab.names)
        names_before = vocab.word.findall(raw, last_end, brace)
        if not shapes and isinstance(value, dict) and names_before:
            shapes = [(names_before[-1], value)]
        calls += [RawCall(name, 0, len(raw), mapping=args) for name, args in shapes]
        position = last_end = group.end
    return calls
