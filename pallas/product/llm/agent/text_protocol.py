"""Function calls written as text, for models without native tool calling.

The model is asked to end its answer with calls in one fenced code block:

    ```
    reply(text="好呀，晚上八点见", target_message_id=1042)
    ```

Parsing is lenient on purpose (better parse leniently than let the whole turn crash) and never
raises: several code blocks are merged, calls in plain text count when no block holds one,
full-width quotes and separators work, stray vendor markup (<tool_call>, DeepSeek tokens,
<invoke>) and JSON-shaped calls are converted when recognizable. Every problem becomes a short
Chinese hint addressed to the model, which the agent feeds back for one retry.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pallas.product.llm.agent.text_protocol_scan import (
    QUOTES,
    RawCall,
    ScanFailure,
    Segment,
    SegmentKind,
    Vocabulary,
    decode_string,
    markup_calls,
    scan_region,
    skip_string,
    split_segments,
    strip_stray_markup,
    vocabulary,
)


class ParamType(StrEnum):
    STR = "str"
    INT = "int"
    BOOL = "bool"
    FLOAT = "float"


@dataclass(frozen=True)
class ParamSpec:
    name: str
    type: ParamType
    required: bool = False


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    params: tuple[ParamSpec, ...] = ()


@dataclass(frozen=True)
class TextCall:
    name: str
    arguments: dict[str, Any]  # values converted to the declared types, in declared order


@dataclass(frozen=True)
class TextParse:
    prose: str  # the text outside the recognized calls
    calls: tuple[TextCall, ...]  # in order of appearance
    issues: tuple[str, ...]  # hints for the model, one per problem


_TYPE_ALIASES = {
    **{alias: ParamType.STR for alias in ("str", "string", "字符串")},
    **{alias: ParamType.INT for alias in ("int", "integer", "整数")},
    **{alias: ParamType.BOOL for alias in ("bool", "boolean", "布尔", "布尔值")},
    **{alias: ParamType.FLOAT for alias in ("float", "number", "double", "小数", "数字")},
}
_TYPE_WORDS = {
    ParamType.STR: "字符串",
    ParamType.INT: "整数",
    ParamType.BOOL: "布尔值（true 或 false）",
    ParamType.FLOAT: "数字",
}
_EXAMPLE_VALUES = {
    ParamType.STR: '"好的"',
    ParamType.INT: "1",
    ParamType.BOOL: "true",
    ParamType.FLOAT: "0.5",
}
_BOOL_WORDS = {"true": True, "false": False, "yes": True, "no": False, "是": True, "否": False}
_BOOL_WORDS |= {"1": True, "0": False}
# Bare words that mean "not given"; 可选 is what a model copies from the signature line.
_NULL_WORDS = frozenset({"", "none", "null", "nil", "undefined", "可选"})
_KEY = re.compile(
    r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|[\"'“‘「]([A-Za-z_][A-Za-z0-9_]*)[\"'”’」])\s*([=:＝：])(?![=＝])"
)
# `text: str = "hi"`: a model imitating the signature line writes the type before the value.
_ANNOTATION = re.compile(r"\s*([A-Za-z]+)\s*[=＝](?![=＝])")
_SHOWN_CHARS = 30

FORMAT_HINT = (
    "不要使用 <tool_call>、<invoke> 之类的工具调用标记；"
    '请把函数调用按约定写在回答末尾的一个 ``` 代码块里，例如 函数名(参数名="值")'
)
_RULES = (
    "调用规则：",
    "1. 所有函数调用都写在回答末尾的同一个代码块里（以 ``` 开头、以 ``` 结尾）。",
    "2. 每行写一个调用；参数很长时，一个调用也可以跨多行。",
    '3. 参数写成 参数名=值；字符串值用英文双引号括起来，里面的双引号写成 \\"，换行写成 \\n。',
    "4. 整数和小数直接写数字，布尔值写 true 或 false；标着“可选”的参数不需要时可以不写。",
    "5. 不要使用 XML 标签、JSON 或其他任何工具调用格式。",
)


def normalize_type_name(name: str) -> ParamType | None:
    """The parameter type a type word means (string, integer, number, ...), or None."""
    return _TYPE_ALIASES.get(name.strip().lower())


def describe_functions(functions: Sequence[FunctionSpec], descriptions: Mapping[str, str]) -> str:
    """The prompt text offering the functions: signatures, descriptions, rules, an example."""
    if not functions:
        return ""
    lines = ["你可以调用下面这些函数："]
    for spec in functions:
        lines.append(_signature(spec))
        description = descriptions.get(spec.name, "").strip()
        lines += [f"  {line}" for line in description.splitlines() if line.strip()]
    lines += ["", *_RULES, "示例：", "```", _example(functions[0]), "```"]
    return "\n".join(lines)


def _signature(spec: FunctionSpec) -> str:
    params = [f"{p.name}: {p.type.value}" + ("" if p.required else " = 可选") for p in spec.params]
    return f"{spec.name}({', '.join(params)})"


def _example(spec: FunctionSpec) -> str:
    values = [f"{p.name}={_EXAMPLE_VALUES[p.type]}" for p in spec.params if p.required]
    return f"{spec.name}({', '.join(values)})"


def parse_text_actions(text: str, functions: Sequence[FunctionSpec]) -> TextParse:
    """The calls written in a model's answer, the remaining prose, and hints on problems."""
    specs = {spec.name: spec for spec in functions}
    vocab = vocabulary(specs)
    segments = split_segments(text)
    blocks = [_scan_code(s, vocab) if s.kind is SegmentKind.CODE else None for s in segments]
    # Plain-text calls count only when no code block tried to hold one.
    in_prose = not any(block is not None and block[0] for block in blocks)
    raw_calls: list[RawCall] = []
    parts: list[str | None] = []  # None marks where a call was cut out
    issues: list[str] = []
    for segment, block in zip(segments, blocks, strict=True):
        if block is not None:  # a block that held no call stays in prose verbatim
            attempted, found, block_issues = block
            raw_calls += found
            issues += block_issues
            parts.append(None if attempted else segment.raw)
        elif segment.kind is SegmentKind.MARKUP:
            found = markup_calls(segment.raw, vocab)
            raw_calls += found
            issues += [] if found else [FORMAT_HINT]
            parts.append(None)
        else:
            found, prose_parts, stray = _scan_prose(segment.raw, vocab, in_prose)
            raw_calls += found
            issues += [FORMAT_HINT] if stray else []
            parts += prose_parts
    calls = [call for raw in raw_calls if (call := _resolve(raw, specs, issues)) is not None]
    return TextParse(_assemble(parts), tuple(calls), tuple(dict.fromkeys(issues)))


def _scan_code(segment: Segment, vocab: Vocabulary) -> tuple[bool, list[RawCall], list[str]]:
    """Calls in one code block, in order; whether the block tried to hold calls at all."""
    found: list[RawCall] = []
    issues: list[str] = []
    for part in split_segments(segment.body, fences=False):
        if part.kind is SegmentKind.MARKUP:
            calls = markup_calls(part.raw, vocab)
            issues += [] if calls else [FORMAT_HINT]
        else:
            cleaned, stray = strip_stray_markup(part.raw)
            calls = scan_region(cleaned, vocab)
            issues += [FORMAT_HINT] if stray else []
        found += calls
    return bool(found or issues), found, issues


def _scan_prose(
    text: str, vocab: Vocabulary, with_calls: bool
) -> tuple[list[RawCall], list[str | None], bool]:
    cleaned, stray = strip_stray_markup(text)
    found = scan_region(cleaned, vocab) if with_calls else []
    parts: list[str | None] = []
    position = 0
    for call in found:
        if call.failure is not None or call.start < position:
            continue  # an unclosed call has no known extent; several JSON calls share one
        start, end = call.start, call.end
        if start > 0 and end < len(cleaned) and cleaned[start - 1] == cleaned[end] == "`":
            start, end = start - 1, end + 1  # inline code `reply(...)`
        if cleaned[end : end + 1] == ";":
            end += 1
        parts += [cleaned[position:start], None]
        position = end
    parts.append(cleaned[position:])
    return found, parts, stray


def _assemble(parts: Sequence[str | None]) -> str:
    runs: list[list[str]] = [[]]
    for part in parts:
        if part is None:
            runs.append([])
        else:
            runs[-1].append(part)
    texts = ["".join(run).strip() for run in runs]
    return "\n".join(text for text in texts if text)


def _resolve(raw: RawCall, specs: Mapping[str, FunctionSpec], issues: list[str]) -> TextCall | None:
    if raw.failure is ScanFailure.UNTERMINATED_STRING:
        issues.append(f"{raw.name} 的调用没有闭合：有字符串缺少结束引号，这次调用没有执行")
        return None
    if raw.failure is not None:
        issues.append(f"{raw.name} 的调用没有闭合的括号，这次调用没有执行")
        return None
    spec = specs.get(raw.name)
    if spec is None:
        issues.append(f"没有名为 {_show(raw.name)} 的函数，可用的函数有：{'、'.join(specs)}")
        return None
    if raw.mapping is not None:
        arguments = [_Argument(str(key), value, bare=False) for key, value in raw.mapping.items()]
    else:
        arguments = _text_arguments(raw, spec)
    return _bind(spec, arguments, issues)


@dataclass(frozen=True)
class _Argument:
    key: str | None  # None: positional
    value: object  # None: explicitly not given
    bare: bool  # written without quotes


def _text_arguments(raw: RawCall, spec: FunctionSpec) -> list[_Argument]:
    arguments: list[_Argument] = []
    for chunk in raw.chunks:
        argument = _parse_chunk(chunk.text, spec)
        previous = arguments[-1] if arguments else None
        if argument is None:
            continue
        if previous is not None and _continues(previous, argument, spec):
            # text=好的, 明天见 was cut at its own comma: glue the pieces back together.
            merged = f"{previous.value}{chunk.separator}{chunk.text.rstrip()}"
            arguments[-1] = _Argument(previous.key, merged, bare=True)
        else:
            arguments.append(argument)
    return arguments


def _parse_chunk(text: str, spec: FunctionSpec) -> _Argument | None:
    key, rest = _split_key(text, spec)
    value = rest.strip()
    if not value and key is None:
        return None  # a trailing comma
    if value and value[0] in QUOTES and skip_string(value, 0) == len(value):
        return _Argument(key, decode_string(value), bare=False)
    return _Argument(key, None if value.lower() in _NULL_WORDS else value, bare=True)


def _split_key(text: str, spec: FunctionSpec) -> tuple[str | None, str]:
    match = _KEY.match(text)
    if match is None:
        return None, text
    key = match[1] or match[2]
    colon = match[3] in ":："
    if colon and all(p.name != key for p in spec.params):
        return None, text  # "http://..." or "注意: ..." is a value, not an unknown key
    rest = text[match.end() :]
    annotation = _ANNOTATION.match(rest) if colon else None
    if annotation is not None and normalize_type_name(annotation[1]) is not None:
        rest = rest[annotation.end() :]
    return key, rest


def _continues(previous: _Argument, argument: _Argument, spec: FunctionSpec) -> bool:
    if previous.key is None or argument.key is not None or previous.value is None:
        return False
    if not (previous.bare and argument.bare):
        return False
    return any(p.name == previous.key and p.type is ParamType.STR for p in spec.params)


def _bind(spec: FunctionSpec, arguments: Sequence[_Argument], issues: list[str]) -> TextCall | None:
    params = {p.name: p for p in spec.params}
    given: dict[str, object] = {}
    for argument in arguments:
        if argument.key is None:
            slot = next((name for name in params if name not in given), None)
            if slot is None:
                issues.append(f"{spec.name} 多出了参数 {_show(argument.value)}，已忽略")
            else:
                given[slot] = argument.value
        elif argument.key not in params:
            issues.append(f"{spec.name} 没有参数 {_show(argument.key)}，已忽略")
        elif argument.key in given:
            issues.append(f"{spec.name} 的参数 {argument.key} 重复了，只保留第一个")
        else:
            given[argument.key] = argument.value
    return _finish(spec, given, issues)


def _finish(spec: FunctionSpec, given: Mapping[str, object], issues: list[str]) -> TextCall | None:
    values: dict[str, object] = {}
    valid = True
    for param in spec.params:  # declared order, so arguments read like the signature
        raw = given.get(param.name)
        converted = None if raw is None else _CONVERTERS[param.type](raw)
        if converted is not None:
            values[param.name] = converted
        elif raw is not None:
            issues.append(
                f"{spec.name} 的参数 {param.name} 应为{_TYPE_WORDS[param.type]}，"
                f"收到的是 {_show(raw)}，这次调用没有执行"
            )
            valid = False
    missing = [p.name for p in spec.params if p.required and given.get(p.name) is None]
    if missing:
        issues.append(f"{spec.name} 缺少必填参数 {'、'.join(missing)}，这次调用没有执行")
    if missing or not valid:
        return None
    return TextCall(spec.name, values)


def _to_str(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return _json_text(value)
    return str(value)


def _to_float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _to_int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    number = _to_float(value)  # 1042.0 and "1042.0" are fine, 10.5 is not
    return int(number) if number is not None and number.is_integer() else None


def _to_bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | str):
        return _BOOL_WORDS.get(str(value).strip().lower())
    return None


_CONVERTERS: dict[ParamType, Callable[[object], object | None]] = {
    ParamType.STR: _to_str,
    ParamType.INT: _to_int,
    ParamType.BOOL: _to_bool,
    ParamType.FLOAT: _to_float,
}


def _json_text(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, skipkeys=True, default=str)
    except (ValueError, RecursionError):
        return str(value)


def _show(value: object) -> str:
    text = value if isinstance(value, str) else _json_text(value)
    text = text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"
    return f'"{text}"' if isinstance(value, str) else text
