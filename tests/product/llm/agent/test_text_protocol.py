"""The text tool protocol: one row per parsing rule, with the model output a chat model writes."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from pallas.product.llm.agent.text_protocol import (
    FORMAT_HINT,
    FunctionSpec,
    ParamSpec,
    ParamType,
    TextCall,
    TextParse,
    describe_functions,
    normalize_type_name,
    parse_text_actions,
)
from tests.product.llm.agent.protocol_specs import REMEMBER, REPLY, SILENT, WAIT

FUNCTIONS = (REPLY, SILENT, WAIT, REMEMBER)


@dataclass(frozen=True)
class Case:
    text: str
    calls: list[tuple[str, dict[str, Any]]]
    prose: str = ""
    issues: list[str] = field(default_factory=list)  # a fragment of each hint, in order


def case(id_: str, text: str, calls: list[tuple[str, dict[str, Any]]], **more: Any) -> Any:
    return pytest.param(Case(text, calls, **more), id=id_)


CASES = [
    # 1. Calls by name, balanced brackets, quoted strings, spanning lines.
    case(
        "call with commas and parentheses inside the string",
        '```\nreply(text="好呀，晚上八点见 (就在老地方), 别迟到", target_message_id=1042)\n```',
        [("reply", {"text": "好呀，晚上八点见 (就在老地方), 别迟到", "target_message_id": 1042})],
    ),
    case(
        "a call spanning lines, the string holding a raw newline",
        '```\nreply(\n    text="第一行\n第二行",\n    target_message_id=7,\n)\n```',
        [("reply", {"text": "第一行\n第二行", "target_message_id": 7})],
    ),
    case(
        "a qualified name and full-width parentheses",
        "```\nfunctions.silent（reason=“困了”）\n```",
        [("silent", {"reason": "困了"})],
    ),
    case(
        "names not offered, or inside a longer name, are not calls",
        'search(q="天气") 和 myreply(text="x")',
        [],
        prose='search(q="天气") 和 myreply(text="x")',
    ),
    case(
        "a call with no arguments",
        "```\nwait()\n```",
        [("wait", {})],
    ),
    # 2. Code blocks: with or without a language tag, merged, or none at all.
    case(
        "a block with a language tag",
        '收到～\n```python\nreply(text="收到")\n```',
        [("reply", {"text": "收到"})],
        prose="收到～",
    ),
    case(
        "several blocks are merged in order",
        '```\nreply(text="先说这个")\n```\n想了想\n```\nwait(seconds=30)\nsilent(reason="等他")\n```',
        [
            ("reply", {"text": "先说这个"}),
            ("wait", {"seconds": 30}),
            ("silent", {"reason": "等他"}),
        ],
        prose="想了想",
    ),
    case(
        "no block: calls in plain text are recognized",
        '我来回一下 reply(text="哈哈哈", target_message_id=3)',
        [("reply", {"text": "哈哈哈", "target_message_id": 3})],
        prose="我来回一下",
    ),
    case(
        "a block holding no call stays in prose verbatim",
        '这样写：\n```python\nprint("hello")\n```\n`reply(text="发你了")`',
        [("reply", {"text": "发你了"})],
        prose='这样写：\n```python\nprint("hello")\n```',
    ),
    case(
        "a block the model forgot to close runs to the end",
        '好的\n```\nreply(text="马上到")',
        [("reply", {"text": "马上到"})],
        prose="好的",
    ),
    case(
        "a block holding only unreadable markup still keeps prose calls out",
        '```\n<tool_call>reply 一下</tool_call>\n```\n别用 reply(text="这个")',
        [],
        prose='别用 reply(text="这个")',
        issues=[FORMAT_HINT],
    ),
    case(
        "a four-backtick block quoting a tagged block reads the markup inside",
        '````\n```xml\n<invoke name="silent"><parameter name="reason">困了</parameter></invoke>'
        "\n```\n````",
        [("silent", {"reason": "困了"})],
    ),
    case(
        "calls in a block and in markup after it are both kept",
        '```\nreply(text="先说")\n```\n'
        '<tool_call>{"name": "wait", "arguments": {"seconds": 5}}</tool_call>',
        [("reply", {"text": "先说"}), ("wait", {"seconds": 5})],
    ),
    case(
        "an inline fenced call on one line",
        '```reply(text="嗯嗯")```',
        [("reply", {"text": "嗯嗯"})],
    ),
    # 3. Quotes: ASCII, full-width, corner brackets; escapes decoded.
    case(
        "single, curly and corner-bracket quotes",
        "```\nreply('好') \nsilent(reason=“没空”)\nreply(text=‘行’)\nreply(text=「收到」)\n```",
        [
            ("reply", {"text": "好"}),
            ("silent", {"reason": "没空"}),
            ("reply", {"text": "行"}),
            ("reply", {"text": "收到"}),
        ],
    ),
    case(
        "escapes are decoded",
        '```\nreply(text="他说：\\"走吧\\"\\n路径 C:\\\\temp")\n```',
        [("reply", {"text": '他说："走吧"\n路径 C:\\temp'})],
    ),
    case(
        "an unescaped quote inside Chinese text and an apostrophe in bare text",
        '```\nreply(text="他说"好"吧")\nsilent(reason=it\'s late)\n```',
        [("reply", {"text": '他说"好"吧'}), ("silent", {"reason": "it's late"})],
    ),
    # 4. Arguments: keyword forms, positional, bare values, conversions.
    case(
        "keyword with colon, full-width equals and full-width colon",
        "```\nreply(text: \"嗯\", target_message_id＝5)\nsilent(reason：'下线了')\n```",
        [("reply", {"text": "嗯", "target_message_id": 5}), ("silent", {"reason": "下线了"})],
    ),
    case(
        "positional values follow the declared order",
        '```\nremember("小王喜欢猫", true, 0.8)\n```',
        [("remember", {"fact": "小王喜欢猫", "important": True, "weight": 0.8})],
    ),
    case(
        "bare values: strings, 是/否, quoted numbers converted",
        '```\nremember(fact=小王养了一只猫, important=是, weight="2")\n'
        'reply(text=好, target_message_id="1042")\n```',
        [
            ("remember", {"fact": "小王养了一只猫", "important": True, "weight": 2.0}),
            ("reply", {"text": "好", "target_message_id": 1042}),
        ],
    ),
    case(
        "a bare string cut at its own comma is glued back",
        "```\nreply(text=好的，明天见, target_message_id=9)\n```",
        [("reply", {"text": "好的，明天见", "target_message_id": 9})],
    ),
    case(
        "None and 可选 mean not given; a copied type annotation is skipped",
        '```\nreply(text: str = "好", target_message_id=None)\nwait(seconds=可选)\n```',
        [("reply", {"text": "好"}), ("wait", {})],
    ),
    case(
        "False and 否 are booleans",
        "```\nremember(fact=\"x\", important=False)\nremember(fact='y', important=否)\n```",
        [
            ("remember", {"fact": "x", "important": False}),
            ("remember", {"fact": "y", "important": False}),
        ],
    ),
    case(
        "a colon after a word that is no parameter stays in the value",
        "```\nreply(https://example.com/a, 3)\nsilent(note: 别吵)\n```",
        [
            ("reply", {"text": "https://example.com/a", "target_message_id": 3}),
            ("silent", {"reason": "note: 别吵"}),
        ],
    ),
    # 5. Problems become hints: unknown argument kept out, bad calls dropped.
    case(
        "an unknown keyword is dropped, the call kept",
        '```\nreply(text="好", mood="开心")\n```',
        [("reply", {"text": "好"})],
        issues=['reply 没有参数 "mood"'],
    ),
    case(
        "a missing required parameter drops the call",
        "```\nreply(target_message_id=3)\nwait(seconds=10)\n```",
        [("wait", {"seconds": 10})],
        issues=["reply 缺少必填参数 text"],
    ),
    case(
        "a value that cannot be converted drops the call",
        '```\nreply(text="好", target_message_id="abc")\n```',
        [],
        issues=['reply 的参数 target_message_id 应为整数，收到的是 "abc"'],
    ),
    case(
        "a fractional number for an integer parameter is not rounded down",
        '```\nwait(seconds=10.5)\n{"name": "wait", "arguments": {"seconds": 10.5}}\n'
        "wait(seconds=30.0)\n```",
        [("wait", {"seconds": 30})],
        issues=[
            'wait 的参数 seconds 应为整数，收到的是 "10.5"',
            "wait 的参数 seconds 应为整数，收到的是 10.5",
        ],
    ),
    case(
        "infinite and NaN numbers are refused",
        '```\nremember(fact="a", weight=inf)\nremember(fact="b", weight=NaN)\n'
        'remember(fact="c", weight=1e999)\n{"name": "remember", "arguments": '
        '{"fact": "d", "weight": "-Infinity"}}\n```',
        [],
        issues=[
            'remember 的参数 weight 应为数字，收到的是 "inf"',
            'remember 的参数 weight 应为数字，收到的是 "NaN"',
            'remember 的参数 weight 应为数字，收到的是 "1e999"',
            'remember 的参数 weight 应为数字，收到的是 "-Infinity"',
        ],
    ),
    case(
        "an extra positional value and a repeated keyword",
        '```\nwait(5, 6)\nsilent(reason="a", reason="b")\n```',
        [("wait", {"seconds": 5}), ("silent", {"reason": "a"})],
        issues=['wait 多出了参数 "6"', "silent 的参数 reason 重复了"],
    ),
    # 6. Vendor tool-call markup: converted when recognizable, else stripped with a hint.
    case(
        "Hermes/Qwen <tool_call> with JSON",
        '好的\n<tool_call>\n{"name": "reply", "arguments": {"text": "来了"}}\n</tool_call>',
        [("reply", {"text": "来了"})],
        prose="好的",
    ),
    case(
        "DeepSeek tool-call tokens",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>reply\n"
        '```json\n{"text": "晚安", "target_message_id": 12}\n```'
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        [("reply", {"text": "晚安", "target_message_id": 12})],
    ),
    case(
        "DeepSeek DSML invoke with parameters",
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="reply">\n'
        '<｜DSML｜parameter name="text" string="true">在的</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="target_message_id" string="false">8</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        [("reply", {"text": "在的", "target_message_id": 8})],
    ),
    case(
        "<function_calls> with <invoke>, inside a code block",
        '```\n<function_calls>\n<invoke name="silent">\n'
        '<parameter name="reason">刷屏了</parameter>\n</invoke>\n</function_calls>\n```\n不说了',
        [("silent", {"reason": "刷屏了"})],
        prose="不说了",
    ),
    case(
        "Qwen <function=...> with <parameter=...>",
        "<tool_call>\n<function=wait>\n<parameter=seconds>\n20\n</parameter>\n</function>\n</tool_call>",
        [("wait", {"seconds": 20})],
    ),
    case(
        "markup without a recognizable call is stripped with a hint",
        "我想想<tool_call>reply 一下</tool_call>再说",
        [],
        prose="我想想\n再说",
        issues=[FORMAT_HINT],
    ),
    case(
        "stray closing tags and special tokens are stripped with a hint",
        "好的</tool_call><|im_end|>",
        [],
        prose="好的",
        issues=[FORMAT_HINT],
    ),
    case(
        "<tool_call> with JSON inside a code block",
        '```\n<tool_call>{"name": "reply", "arguments": {"text": "好"}}</tool_call>\n```',
        [("reply", {"text": "好"})],
    ),
    case(
        "unreadable markup before a call in a block still gets a hint",
        '```\n<tool_call>reply 一下</tool_call>\nreply(text="x")\n```',
        [("reply", {"text": "x"})],
        issues=[FORMAT_HINT],
    ),
    case(
        "a stray closing tag after a call in a block gets a hint",
        '```\nreply(text="x")</tool_call>\n```',
        [("reply", {"text": "x"})],
        issues=[FORMAT_HINT],
    ),
    case(
        "a leaked special token before readable markup in a block keeps its hint",
        "```\n<|im_start|>\n"
        '<tool_call>{"name": "reply", "arguments": {"text": "好"}}</tool_call>\n```',
        [("reply", {"text": "好"})],
        issues=[FORMAT_HINT],
    ),
    case(
        "a leaked special token before readable markup in prose keeps its hint",
        '<|im_start|>好的\n<tool_call>{"name": "reply", "arguments": {"text": "来了"}}</tool_call>',
        [("reply", {"text": "来了"})],
        prose="好的",
        issues=[FORMAT_HINT],
    ),
    case(
        "a stray tag in prose before a code block keeps its hint",
        '好的</tool_call>\n```\nreply(text="x")\n```',
        [("reply", {"text": "x"})],
        prose="好的",
        issues=[FORMAT_HINT],
    ),
    case(
        "markup naming an unknown function",
        '<tool_call>{"name": "search", "arguments": {"q": "天气"}}</tool_call>',
        [],
        issues=['没有名为 "search" 的函数，可用的函数有：reply、silent、wait、remember'],
    ),
    # 7. JSON-shaped calls in a code block.
    case(
        "name and arguments",
        '```json\n{"name": "reply", "arguments": {"text": "好嘞", "target_message_id": "5"}}\n```',
        [("reply", {"text": "好嘞", "target_message_id": 5})],
    ),
    case(
        "action with flat arguments, and the OpenAI shape with string arguments",
        '```\n{"action": "silent", "reason": "没我的事"}\n'
        '{"type": "function", "function": '
        '{"name": "wait", "arguments": "{\\"seconds\\": 15}"}}\n```',
        [("silent", {"reason": "没我的事"}), ("wait", {"seconds": 15})],
    ),
    case(
        "a Python-style list of calls",
        "```\n[{'name': 'reply', 'arguments': {'text': '单引号'}}, {'name': 'wait'}]\n```",
        [("reply", {"text": "单引号"}), ("wait", {})],
    ),
    case(
        "JSON naming no known function is data and stays in prose",
        '配置如下：\n```json\n{"name": "小明", "age": 3}\n```',
        [],
        prose='配置如下：\n```json\n{"name": "小明", "age": 3}\n```',
    ),
    # 8. Outside code blocks only when no block holds a call.
    case(
        "a call in prose is ignored when a block holds one",
        '别用 reply(text="这个")\n```\nsilent(reason="算了")\n```',
        [("silent", {"reason": "算了"})],
        prose='别用 reply(text="这个")',
    ),
    case(
        "an unclosed call in prose stays in the prose",
        '我来回一下 reply(text="好"',
        [],
        prose='我来回一下 reply(text="好"',
        issues=["reply 的调用没有闭合的括号，这次调用没有执行"],
    ),
    case(
        "a call at the very start of the prose is cut out",
        'reply(text="好")\n然后呢',
        [("reply", {"text": "好"})],
        prose="然后呢",
    ),
    case(
        "a call after an unclosed one is still cut out of the prose",
        '先 reply(text=好 再说\nsilent(reason="累")',
        [("silent", {"reason": "累"})],
        prose="先 reply(text=好 再说",
        issues=["reply 的调用没有闭合的括号，这次调用没有执行"],
    ),
    case(
        "a call between words without spaces cuts only itself",
        '收到reply(text="好")！',
        [("reply", {"text": "好"})],
        prose="收到\n！",
    ),
    case(
        "a call at the very start followed by a backtick is not inline code",
        'reply(text="好")` 用了 `reply`',
        [("reply", {"text": "好"})],
        prose="` 用了 `reply`",
    ),
    case(
        "inline code that is the whole answer",
        '`reply(text="发你了")`',
        [("reply", {"text": "发你了"})],
    ),
    case(
        "inline code between punctuation takes only its backticks",
        '收到：`reply(text="好")`！',
        [("reply", {"text": "好"})],
        prose="收到：\n！",
    ),
    case(
        "a semicolon after a call goes with it",
        'reply(text="好");再见',
        [("reply", {"text": "好"})],
        prose="再见",
    ),
    case(
        "several calls in prose leave the words between them",
        '先回一句 reply(text="好") 然后等等 wait(seconds=5) 就这样',
        [("reply", {"text": "好"}), ("wait", {"seconds": 5})],
        prose="先回一句\n然后等等\n就这样",
    ),
    # 9. Broken input yields hints, never an exception.
    case(
        "an unclosed parenthesis",
        '```\nreply(text="好"\nwait(seconds=3)\n```',
        [("wait", {"seconds": 3})],
        issues=["reply 的调用没有闭合的括号"],
    ),
    case(
        "an unterminated string",
        '```\nreply(text="好)\n```',
        [],
        issues=["reply 的调用没有闭合：有字符串缺少结束引号"],
    ),
    case("empty text", "", []),
    case("only a fence", "```", [], prose="```"),
]


@pytest.mark.parametrize("expected", CASES)
def test_parse_text_actions(expected: Case) -> None:
    parsed = parse_text_actions(expected.text, FUNCTIONS)
    assert [(call.name, call.arguments) for call in parsed.calls] == expected.calls
    assert parsed.prose == expected.prose
    assert len(parsed.issues) == len(expected.issues), parsed.issues
    for issue, fragment in zip(parsed.issues, expected.issues, strict=True):
        assert fragment in issue


def test_result_types() -> None:
    parsed = parse_text_actions('```\nreply(text="hi")\n```', FUNCTIONS)
    assert parsed == TextParse("", (TextCall("reply", {"text": "hi"}),), ())


ADVERSARIAL = [
    pytest.param("reply(" + "(" * 10_000, id="10,000 unclosed parentheses"),
    pytest.param(
        "```\nreply(text=" + "(" * 10_000 + ")" * 10_001 + "\n```", id="balanced 10,000 deep"
    ),
    pytest.param("```json\n" + "[" * 10_000 + "]" * 10_000 + "\n```", id="JSON array 10,000 deep"),
    pytest.param("{" * 100_000, id="100 KB of open braces"),
    pytest.param('reply(text="' + "啊" * 100_000, id="100 KB unterminated string"),
    pytest.param('reply("' * 15_000, id="many unterminated calls"),
    pytest.param("```" * 33_000, id="100 KB of fences"),
    pytest.param('<invoke name="reply"><parameter name="text">' * 2_000, id="unclosed markup"),
    pytest.param("<｜tool▁calls▁begin｜>" * 5_000, id="DeepSeek tokens"),
    pytest.param("reply(" + "," * 100_000 + ")", id="100,000 commas"),
    pytest.param("reply(text=1, target_message_id=" + "9" * 50_000 + ")", id="huge number"),
    pytest.param('reply(text="' + "\\" * 100_001, id="trailing backslashes"),
]


@pytest.mark.parametrize("text", ADVERSARIAL)
def test_adversarial_input_is_parsed(text: str) -> None:
    # How fast: bench/text_protocol_bench.py (no timed assertions in tests).
    assert isinstance(parse_text_actions(text, FUNCTIONS), TextParse)


def test_random_garbage_never_raises() -> None:
    alphabet = "()[]{}（）【】,，=:＝：\"'“”‘’「」`\\<>|｜▁/ \nreply wait text=1 true 好的"
    rng = random.Random(20240601)
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
        assert isinstance(parse_text_actions(text, FUNCTIONS), TextParse)
    garbage = "".join(rng.choice(alphabet) for _ in range(100_000))
    assert isinstance(parse_text_actions(garbage, FUNCTIONS), TextParse)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("str", ParamType.STR),
        ("String", ParamType.STR),
        ("int", ParamType.INT),
        ("integer", ParamType.INT),
        ("bool", ParamType.BOOL),
        (" boolean ", ParamType.BOOL),
        ("float", ParamType.FLOAT),
        ("number", ParamType.FLOAT),
        ("double", ParamType.FLOAT),
        ("整数", ParamType.INT),
        ("object", None),
        ("", None),
    ],
)
def test_normalize_type_name(name: str, expected: ParamType | None) -> None:
    assert normalize_type_name(name) is expected


def test_describe_functions_lists_signatures_descriptions_and_rules() -> None:
    text = describe_functions(
        [REPLY, SILENT], {"reply": "在群里说话。\n可以分几行。", "silent": "这次不说话。"}
    )
    assert "reply(text: str, target_message_id: int = 可选)\n  在群里说话。\n  可以分几行。" in text
    assert "silent(reason: str)\n  这次不说话。" in text
    for rule in ("同一个代码块", "跨多行", "英文双引号", "不要使用 XML 标签、JSON"):
        assert rule in text
    assert text.endswith('```\nreply(text="好的")\n```')


REMIND = FunctionSpec(
    "remind",
    (
        ParamSpec("text", ParamType.STR, required=True),
        ParamSpec("minutes", ParamType.INT, required=True),
        ParamSpec("loud", ParamType.BOOL),
    ),
)


def test_describe_functions_full_text() -> None:
    # The model reads this verbatim: header, signatures, descriptions, rules and example.
    text = describe_functions([REMIND, WAIT], {"remind": "提醒群友。\n到点再说一次。"})
    assert text == "\n".join(
        [
            "你可以调用下面这些函数：",
            "remind(text: str, minutes: int, loud: bool = 可选)",
            "  提醒群友。",
            "  到点再说一次。",
            "wait(seconds: int = 可选)",
            "",
            "调用规则：",
            "1. 所有函数调用都写在回答末尾的同一个代码块里（以 ``` 开头、以 ``` 结尾）。",
            "2. 每行写一个调用；参数很长时，一个调用也可以跨多行。",
            '3. 参数写成 参数名=值；字符串值用英文双引号括起来，里面的双引号写成 \\"，'
            "换行写成 \\n。",
            "4. 整数和小数直接写数字，布尔值写 true 或 false；标着“可选”的参数不需要时可以不写。",
            "5. 不要使用 XML 标签、JSON 或其他任何工具调用格式。",
            "示例：",
            "```",
            'remind(text="好的", minutes=1)',
            "```",
        ]
    )


def test_describe_functions_example_parses_back() -> None:
    text = describe_functions(FUNCTIONS, {})
    example = text[text.index("示例：") :]
    assert parse_text_actions(example, FUNCTIONS).calls == (TextCall("reply", {"text": "好的"}),)


def test_describe_no_functions() -> None:
    assert describe_functions([], {}) == ""
