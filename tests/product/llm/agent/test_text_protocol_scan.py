"""The scanner under the text tool protocol: the shapes models write calls in, read through
the public parser, and the scanner's own contracts (segments, strings, the give-up budget)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from pallas.product.llm.agent.text_protocol import (
    FORMAT_HINT,
    parse_text_actions,
)
from pallas.product.llm.agent.text_protocol_scan import (
    MAX_FAILED_SCANS,
    Chunk,
    RawCall,
    ScanFailure,
    Segment,
    SegmentKind,
    _closes_string,
    _opens_string,
    call_shapes,
    decode_string,
    load_literal,
    markup_calls,
    scan_region,
    skip_string,
    split_segments,
    vocabulary,
)
from tests.product.llm.agent.protocol_specs import REPLY, SILENT, WAIT

FUNCTIONS = (REPLY, SILENT, WAIT)
VOCAB = vocabulary([spec.name for spec in FUNCTIONS])
MISSING_TEXT = "reply 缺少必填参数 text，这次调用没有执行"
REPLY_UNCLOSED = "reply 的调用没有闭合的括号，这次调用没有执行"
# DeepSeek writes each call as `function<｜tool▁sep｜>NAME` and a fenced JSON arguments object.
DS_BEGIN, DS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"


def deepseek(*calls: tuple[str, str]) -> str:
    return (
        DS_BEGIN
        + "".join(
            f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{arguments}\n```"
            "<｜tool▁call▁end｜>"
            for name, arguments in calls
        )
        + DS_END
    )


@dataclass(frozen=True)
class Case:
    text: str
    calls: list[tuple[str, dict[str, Any]]]
    prose: str = ""
    issues: tuple[str, ...] = ()  # exact hints, in order


def case(id_: str, text: str, calls: list[tuple[str, dict[str, Any]]], **more: Any) -> Any:
    return pytest.param(Case(text, calls, **more), id=id_)


PARSE_CASES = [
    # Llama style: <function=name> followed by the arguments as a JSON object.
    case(
        "Llama markup with a JSON arguments object",
        '<function=reply>{"text": "好的", "target_message_id": 3}</function>',
        [("reply", {"text": "好的", "target_message_id": 3})],
    ),
    case(
        "Llama markup after prose, the object on its own line",
        '等我一下\n<function=wait>\n{"seconds": 5}\n</function>',
        [("wait", {"seconds": 5})],
        prose="等我一下",
    ),
    case(
        "Llama markup whose object is the whole call shape",
        '<function=reply>{"name": "reply", "arguments": {"text": "在"}}</function>',
        [("reply", {"text": "在"})],
    ),
    case(
        "Llama markup with braces inside a string value",
        '<function=reply>{"text": "我觉得 {这个} 不错"}</function>',
        [("reply", {"text": "我觉得 {这个} 不错"})],
    ),
    case(
        "Llama markup whose braces hold no arguments object",
        '<function=reply>{"好的"}</function>',
        [],
        issues=(MISSING_TEXT,),
    ),
    case(
        "Llama markup without arguments",
        "<function=wait></function>",
        [("wait", {})],
    ),
    # XML parameters: compact markup, and parameters the model never closed.
    case(
        "a parameter right after the invoke tag, never closed",
        '<function_calls><invoke name="reply"><parameter name="text">好的</invoke>'
        "</function_calls>",
        [("reply", {"text": "好的"})],
    ),
    case(
        "an empty parameter never closed is not given",
        '<invoke name="wait"><parameter name="seconds"></invoke>',
        [("wait", {})],
    ),
    # DeepSeek tokens: each bare arguments object takes the name written just before it.
    case(
        "DeepSeek with two calls, each object taking its own name",
        deepseek(("reply", '{"text": "晚安"}'), ("wait", '{"seconds": 60}')),
        [("reply", {"text": "晚安"}), ("wait", {"seconds": 60})],
    ),
    case(
        "DeepSeek arguments written as the whole call shape",
        deepseek(("reply", '{"name": "reply", "arguments": {"text": "在"}}')),
        [("reply", {"text": "在"})],
    ),
    case(
        "DeepSeek arguments that do not parse are no call",
        deepseek(("reply", "{text: 在}")),
        [],
        issues=(FORMAT_HINT,),
    ),
    # JSON-shaped calls.
    case(
        "flat JSON: type and id are no arguments",
        '```\n{"type": "function", "id": "call_1", "action": "silent", "reason": "刷屏"}\n```',
        [("silent", {"reason": "刷屏"})],
    ),
    case(
        "arguments that are no object count as none",
        '```\n{"name": "reply", "arguments": ["好的"]}\n{"name": "wait", "arguments": "5"}\n```',
        [("wait", {})],
        issues=(MISSING_TEXT,),
    ),
    case(
        "of two name fields the one naming a known function wins",
        '```\n{"name": "牛牛", "action": "reply", "arguments": {"text": "在"}}\n```',
        [("reply", {"text": "在"})],
    ),
    case(
        "a JSON call in prose is cut out of the prose",
        '好的 {"name": "reply", "arguments": {"text": "来了"}} 嗯',
        [("reply", {"text": "来了"})],
        prose="好的\n嗯",
    ),
    case(
        "more JSON calls than the failure budget are all read",
        "```\n"
        + '{"name": "wait", "arguments": {"seconds": 1}}\n' * (MAX_FAILED_SCANS + 1)
        + "```",
        [("wait", {"seconds": 1})] * (MAX_FAILED_SCANS + 1),
    ),
    case(
        "a stray brace before a call",
        '```\n{reply(text="在")\n```',
        [("reply", {"text": "在"})],
    ),
    # Text calls.
    case(
        "more text calls than the failure budget are all read",
        "```\n" + "wait(seconds=1)\n" * (MAX_FAILED_SCANS + 1) + "```",
        [("wait", {"seconds": 1})] * (MAX_FAILED_SCANS + 1),
    ),
    case(
        "a call right after an unclosed parenthesis is still found",
        "```\nreply(wait(seconds=3)\n```",
        [("wait", {"seconds": 3})],
        issues=(REPLY_UNCLOSED,),
    ),
    # Strings: where they start and end.
    case(
        "a space before the opening quote",
        '```\nreply(text= "好, 明天见")\n```',
        [("reply", {"text": "好, 明天见"})],
    ),
    case(
        "a space between the closing quote and the comma",
        '```\nreply(text="好" , target_message_id=3)\n```',
        [("reply", {"text": "好", "target_message_id": 3})],
    ),
    case(
        "a string starting with what may follow a value",
        '```\nreply(text=":) 好")\n```',
        [("reply", {"text": ":) 好"})],
    ),
    case(
        "a string ending in a quoted word",
        '```\nreply(text="他就回了一个"好"")\n```',
        [("reply", {"text": '他就回了一个"好"'})],
    ),
    case(
        "a string ending in an escaped backslash",
        '```\nreply(text="在 C:\\\\")\n```',
        [("reply", {"text": "在 C:\\"})],
    ),
    case(
        "an unknown escape stays as written",
        '```\nreply(text="正则 \\d+ 匹配数字")\n```',
        [("reply", {"text": "正则 \\d+ 匹配数字"})],
    ),
    # Fences and stray markup.
    case(
        "a closing fence longer than the opening one",
        '```\nreply(text="在")\n````收到',
        [("reply", {"text": "在"})],
        prose="收到",
    ),
    case(
        "a longer fence holds a shorter one inside a string",
        '````\nreply(text="代码用 ``` 包起来")\n````',
        [("reply", {"text": "代码用 ``` 包起来"})],
    ),
    case(
        "two markup blocks",
        '<tool_call>{"name": "wait"}</tool_call>\n<tool_call>{"name": "wait"}</tool_call>',
        [("wait", {}), ("wait", {})],
    ),
    case(
        "a single stray closing tag",
        "好的</tool_call>",
        [],
        prose="好的",
        issues=(FORMAT_HINT,),
    ),
    case(
        "a stray closing tag before real markup",
        '好的</tool_call>\n<tool_call>{"name": "reply", "arguments": {"text": "来了"}}</tool_call>',
        [("reply", {"text": "来了"})],
        prose="好的",
        issues=(FORMAT_HINT,),
    ),
]


@pytest.mark.parametrize("expected", PARSE_CASES)
def test_model_written_call_shapes(expected: Case) -> None:
    parsed = parse_text_actions(expected.text, FUNCTIONS)
    assert [(call.name, call.arguments) for call in parsed.calls] == expected.calls
    assert parsed.prose == expected.prose
    assert parsed.issues == expected.issues


def code(raw: str, body: str) -> Segment:
    return Segment(SegmentKind.CODE, raw, body)


def prose(raw: str) -> Segment:
    return Segment(SegmentKind.PROSE, raw, raw)


def markup(raw: str) -> Segment:
    return Segment(SegmentKind.MARKUP, raw, raw)


@pytest.mark.parametrize(
    ("text", "segments"),
    [
        pytest.param(
            "```python\nprint(1)\nprint(2)\n```",
            [code("```python\nprint(1)\nprint(2)\n```", "print(1)\nprint(2)\n")],
            id="the language tag is no part of the body",
        ),
        pytest.param(
            "```\nx\n````",
            [code("```\nx\n````", "x\n")],
            id="extra backticks belong to the closing fence",
        ),
        pytest.param("```json", [code("```json", "")], id="an opening fence alone"),
        pytest.param("```嗯。", [code("```嗯。", "嗯。")], id="an unclosed inline fence"),
        pytest.param(
            "好<tool_call>x</tool_call>呀",
            [prose("好"), markup("<tool_call>x</tool_call>"), prose("呀")],
            id="markup between prose",
        ),
        pytest.param(
            "<function=wait></function>```\nwait()\n```",
            [markup("<function=wait></function>"), code("```\nwait()\n```", "wait()\n")],
            id="markup and a fence back to back",
        ),
    ],
)
def test_split_segments(text: str, segments: list[Segment]) -> None:
    assert split_segments(text) == segments


def test_split_segments_without_fences_keeps_backticks_in_prose() -> None:
    assert split_segments("a ``` b", fences=False) == [prose("a ``` b")]


@pytest.mark.parametrize(
    ("text", "end"),
    [
        pytest.param('""', 2, id="empty"),
        pytest.param('":)"', 4, id="starting with a closing parenthesis"),
        pytest.param('"好" ,', 3, id="a space before the comma"),
        pytest.param('"好" , 坏"', 3, id="the first quote before a comma closes"),
        pytest.param('"选"X，还是"Y"', 10, id="a quote before a letter is inside"),
        pytest.param('"a\\"', None, id="an escaped quote does not close"),
        pytest.param('"a\\\\"', 5, id="an escaped backslash before the quote"),
        pytest.param('"好\n', None, id="never closed"),
    ],
)
def test_skip_string(text: str, end: int | None) -> None:
    assert skip_string(text, 0) == end


@pytest.mark.parametrize(
    ("text", "index", "opens"),
    [
        pytest.param('"', 0, True, id="at the start"),
        pytest.param('  "', 2, True, id="after leading spaces"),
        pytest.param('a"', 1, False, id="after a letter at the start"),
        pytest.param("x = '", 4, True, id="after an equals sign and a space"),
        pytest.param("it's", 2, False, id="an apostrophe in a word"),
    ],
)
def test_a_quote_opens_a_string_only_where_a_value_starts(
    text: str, index: int, opens: bool
) -> None:
    assert _opens_string(text, index) is opens


@pytest.mark.parametrize(
    ("text", "after", "closes"),
    [
        pytest.param('"', 1, True, id="at the end"),
        pytest.param('" \t)', 1, True, id="spaces and a tab before a parenthesis"),
        pytest.param('"\r\nx', 1, True, id="at the end of a line"),
        pytest.param('"X)', 1, False, id="before a letter"),
        pytest.param('" x)', 1, False, id="before a word"),
    ],
)
def test_a_quote_closes_a_string_only_before_what_follows_a_value(
    text: str, after: int, closes: bool
) -> None:
    assert _closes_string(text, after) is closes


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ('"a\\nb\\tc\\rd"', "a\nb\tc\rd"),
        ('"\\"\\\'\\\\"', "\"'\\"),
        ('"\\d\\w"', "\\d\\w"),
        ('"好\\。"', "好。"),
    ],
)
def test_decode_string(literal: str, value: str) -> None:
    assert decode_string(literal) == value


def test_scan_region_splits_a_text_call_at_top_level_commas() -> None:
    text = 'x reply(text="a, b"，target_message_id=(1, 2))'
    assert scan_region(text, VOCAB) == [
        RawCall(
            "reply",
            2,
            len(text),
            chunks=(Chunk("", 'text="a, b"'), Chunk("，", "target_message_id=(1, 2)")),
        )
    ]


def test_scan_region_reports_an_unclosed_call_to_the_end() -> None:
    text = 'x reply(text="a"\nwait()'
    assert scan_region(text, VOCAB) == [
        RawCall("reply", 2, len(text), failure=ScanFailure.UNCLOSED),
        RawCall("wait", 17, len(text), chunks=(Chunk("", ""),)),
    ]


def test_scan_region_reports_an_unclosed_call_of_a_one_letter_name_once() -> None:
    text = "f(\nwait()"
    assert scan_region(text, vocabulary(["f", "wait"])) == [
        RawCall("f", 0, len(text), failure=ScanFailure.UNCLOSED),
        RawCall("wait", 3, len(text), chunks=(Chunk("", ""),)),
    ]


@pytest.mark.parametrize(
    ("unclosed", "found"),
    [(MAX_FAILED_SCANS - 1, ["wait"]), (MAX_FAILED_SCANS, [])],
    ids=["within the budget", "past the budget"],
)
def test_scan_region_gives_up_after_a_few_unclosed_calls(unclosed: int, found: list[str]) -> None:
    calls = scan_region("reply(\n" * unclosed + "wait()", VOCAB)
    assert [call.name for call in calls if call.failure is None] == found
    assert [call.failure for call in calls if call.failure] == [ScanFailure.UNCLOSED] * unclosed


@pytest.mark.parametrize(
    ("raw", "calls"),
    [
        pytest.param(
            '<invoke name="reply"><parameter name="text">好</parameter></invoke>'
            '<invoke name="wait"></invoke>',
            [("reply", {"text": "好"}), ("wait", {})],
            id="each invoke takes the parameters up to the next one",
        ),
        pytest.param(
            '<tool_call>{{"action": "silent", "reason": "x"}</tool_call>',
            [("silent", {"reason": "x"})],
            id="an unclosed brace right before the object",
        ),
        pytest.param(
            "<tool_call>" + "{ " * (MAX_FAILED_SCANS - 1) + '{"name": "wait"}</tool_call>',
            [("wait", {})],
            id="unclosed braces within the budget",
        ),
        pytest.param(
            "<tool_call>" + "{ " * MAX_FAILED_SCANS + '{"name": "wait"}</tool_call>',
            [],
            id="unclosed braces past the budget",
        ),
    ],
)
def test_markup_calls_span_the_whole_markup(
    raw: str, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    assert markup_calls(raw, VOCAB) == [
        RawCall(name, 0, len(raw), mapping=mapping) for name, mapping in calls
    ]


def test_a_longer_name_is_not_read_as_a_shorter_one_it_starts_with() -> None:
    # Function names may hold a hyphen, which ends a word for the shorter name.
    vocab = vocabulary(["reply", "reply-sticker"])
    raw = DS_BEGIN + 'function<｜tool▁sep｜>reply-sticker\n{"sticker_id": 3}' + DS_END
    assert [call.name for call in markup_calls(raw, vocab)] == ["reply-sticker"]
    assert vocab.word.findall("reply reply-sticker") == ["reply", "reply-sticker"]


def wrapped(levels: int) -> object:
    value: object = {"name": "wait"}
    for _ in range(levels):
        value = {"calls": value}
    return value


def listed(levels: int) -> object:
    value: object = {"name": "wait"}
    for _ in range(levels):
        value = [value]
    return value


OPENAI_CALL = {"function": {"name": "wait", "arguments": '{"seconds": 5}'}}


@pytest.mark.parametrize(
    ("value", "found"),
    [
        pytest.param(wrapped(4), True, id="four wrappers deep"),
        pytest.param(wrapped(5), False, id="five wrappers deep"),
        pytest.param(listed(4), True, id="four lists deep"),
        pytest.param(listed(5), False, id="five lists deep"),
        pytest.param([{"tool_calls": [OPENAI_CALL]}], True, id="a list of OpenAI messages"),
        pytest.param({"calls": [{"tool_calls": [OPENAI_CALL]}]}, False, id="one level more"),
    ],
)
def test_call_shapes_look_a_few_levels_deep(value: object, found: bool) -> None:
    assert bool(call_shapes(value, VOCAB.names)) is found


@pytest.mark.parametrize(
    ("padding", "parsed"),
    [(20_000, True), (20_001, False)],
    ids=["at the size limit", "past the size limit"],
)
def test_python_literals_are_read_up_to_a_size_limit(padding: int, parsed: bool) -> None:
    # Single quotes make it a Python literal, not JSON.
    head = "{'text': '"
    text = head + "a" * (padding - len(head) - 2) + "'}"
    assert len(text) == padding
    assert (load_literal(text) is not None) is parsed
