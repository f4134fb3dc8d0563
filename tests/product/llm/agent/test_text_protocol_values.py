"""The text tool protocol's arguments: binding to parameters, type conversion, exact hints.

The hints are read by the model for its one retry, so rows assert their full text.
"""

from __future__ import annotations

from typing import Any

import pytest

from pallas.product.llm.agent.text_protocol import (
    FunctionSpec,
    ParamSpec,
    ParamType,
    parse_text_actions,
)
from tests.product.llm.agent.protocol_specs import REMEMBER, REPLY, SILENT, WAIT

# Two required strings and an optional one: gluing, missing lists and absent strings.
NOTE = FunctionSpec(
    "note",
    (
        ParamSpec("title", ParamType.STR, required=True),
        ParamSpec("body", ParamType.STR, required=True),
        ParamSpec("tag", ParamType.STR),
    ),
)
FUNCTIONS = (REPLY, SILENT, WAIT, REMEMBER, NOTE)

Calls = list[tuple[str, dict[str, Any]]]


def row(id_: str, text: str, calls: Calls, issues: tuple[str, ...] = ()) -> Any:
    return pytest.param(text, calls, issues, id=id_)


def block(*lines: str) -> str:
    return "```\n" + "\n".join(lines) + "\n```"


BINDING = [
    row(
        "a doubled comma is skipped, the arguments after it kept",
        block('reply(text="好",, target_message_id=3)'),
        [("reply", {"text": "好", "target_message_id": 3})],
    ),
    row(
        "a glued bare string keeps the space after its comma, not the one before the next",
        block("reply(text=好的, 明天见 , target_message_id=9)"),
        [("reply", {"text": "好的, 明天见", "target_message_id": 9})],
    ),
    row(
        "a bare string cut at two commas is glued back whole",
        block("reply(text=一, 二, 三)"),
        [("reply", {"text": "一, 二, 三"})],
    ),
    row(
        "a glued bare string stays under its keyword, written out of order",
        block("note(body=买菜, 做饭, title=周末)"),
        [("note", {"title": "周末", "body": "买菜, 做饭"})],
    ),
    row(
        "a positional value after a quoted string fills the next parameter",
        block('reply(text="好的", 42)'),
        [("reply", {"text": "好的", "target_message_id": 42})],
    ),
    row(
        "a bare positional value is not glued to a quoted string",
        block('note("买菜", 做饭)'),
        [("note", {"title": "买菜", "body": "做饭"})],
    ),
    row(
        "a quoted positional value is not glued to a bare string",
        block('note(title=买菜, "做饭")'),
        [("note", {"title": "买菜", "body": "做饭"})],
    ),
    row(
        "a positional value after an integer keyword is not glued to it",
        block("reply(target_message_id=5, 好的)"),
        [("reply", {"text": "好的", "target_message_id": 5})],
    ),
    row(
        "quoted keys with a colon or an equals sign",
        block('reply("text": "好", "target_message_id": 3)', "silent('reason'='累了')"),
        [("reply", {"text": "好", "target_message_id": 3}), ("silent", {"reason": "累了"})],
    ),
    row(
        "after an equals sign a type word is part of the value",
        block("reply(text=int = 1 会覆盖内置的 int)"),
        [("reply", {"text": "int = 1 会覆盖内置的 int"})],
    ),
    row(
        "an optional string not given is left out",
        block('note(title="周末", body="买菜")'),
        [("note", {"title": "周末", "body": "买菜"})],
    ),
    row(
        "every missing required parameter is named",
        block("note()"),
        [],
        ("note 缺少必填参数 title、body，这次调用没有执行",),
    ),
    row(
        "an extra value, an unknown keyword and a repeated keyword",
        block("wait(5, 6)", 'reply(text="好", mood="开心")', 'silent(reason="a", reason="b")'),
        [("wait", {"seconds": 5}), ("reply", {"text": "好"}), ("silent", {"reason": "a"})],
        (
            'wait 多出了参数 "6"，已忽略',
            'reply 没有参数 "mood"，已忽略',
            "silent 的参数 reason 重复了，只保留第一个",
        ),
    ),
]


def _json_call(name: str, arguments: str) -> str:
    return f'{{"name": "{name}", "arguments": {arguments}}}'


CONVERSION = [
    row(
        "JSON booleans for a string parameter are written true and false",
        block(_json_call("silent", '{"reason": true}'), _json_call("silent", '{"reason": false}')),
        [("silent", {"reason": "true"}), ("silent", {"reason": "false"})],
    ),
    row(
        "JSON numbers for a string parameter are written as numbers",
        block(_json_call("reply", '{"text": 123}'), _json_call("reply", '{"text": 0.5}')),
        [("reply", {"text": "123"}), ("reply", {"text": "0.5"})],
    ),
    row(
        "a JSON object for a string parameter is written as JSON, Chinese unescaped",
        block(_json_call("reply", '{"text": {"内容": "好", "n": [1, 2]}}')),
        [("reply", {"text": '{"内容": "好", "n": [1, 2]}'})],
    ),
    row(
        "a Python literal with keys JSON cannot hold drops those keys",
        block("{'name': 'reply', 'arguments': {'text': {(1, 2): '坐标', 'a': 1}}}"),
        [("reply", {"text": '{"a": 1}'})],
    ),
    row(
        "a Python literal with values JSON cannot hold writes them as text",
        block("{'name': 'reply', 'arguments': {'text': ['a', {1}, b'x']}}"),
        [("reply", {"text": '["a", "{1}", "b\'x\'"]'})],
    ),
    row(
        "a large JSON integer keeps every digit",
        block(_json_call("reply", '{"text": "x", "target_message_id": 9007199254740993}')),
        [("reply", {"text": "x", "target_message_id": 9007199254740993})],
    ),
    row(
        "a JSON boolean is no number",
        block(_json_call("remember", '{"fact": "x", "weight": true}')),
        [],
        ("remember 的参数 weight 应为数字，收到的是 true，这次调用没有执行",),
    ),
    row(
        "a JSON list or object is no number",
        block(
            _json_call("remember", '{"fact": "x", "weight": [1]}'),
            _json_call("remember", '{"fact": "y", "weight": {"值": 1}}'),
        ),
        [],
        (
            "remember 的参数 weight 应为数字，收到的是 [1]，这次调用没有执行",
            'remember 的参数 weight 应为数字，收到的是 {"值": 1}，这次调用没有执行',
        ),
    ),
    row(
        "a JSON boolean is no integer",
        block(_json_call("wait", '{"seconds": true}')),
        [],
        ("wait 的参数 seconds 应为整数，收到的是 true，这次调用没有执行",),
    ),
    row(
        "numbers and words for a boolean parameter",
        block(
            _json_call("remember", '{"fact": "a", "important": 1}'),
            'remember(fact="b", important=" YES ")',
            "remember(fact=c, important=也许)",
        ),
        [
            ("remember", {"fact": "a", "important": True}),
            ("remember", {"fact": "b", "important": True}),
        ],
        (
            "remember 的参数 important 应为布尔值（true 或 false），"
            '收到的是 "也许"，这次调用没有执行',
        ),
    ),
]

THIRTY = "一二三四五六七八九十" * 3

SHOWN = [
    row(
        "a value of thirty characters is shown whole",
        block(f'wait(5, "{THIRTY}")'),
        [("wait", {"seconds": 5})],
        (f'wait 多出了参数 "{THIRTY}"，已忽略',),
    ),
    row(
        "a longer value is cut after thirty characters",
        block(f'wait(5, "{THIRTY}多")'),
        [("wait", {"seconds": 5})],
        (f'wait 多出了参数 "{THIRTY}…"，已忽略',),
    ),
    row(
        "a long JSON value is cut after thirty characters, without quotes",
        block(_json_call("wait", '{"seconds": ["' + "一" * 40 + '"]}')),
        [],
        ('wait 的参数 seconds 应为整数，收到的是 ["' + "一" * 28 + "…，这次调用没有执行",),
    ),
]


@pytest.mark.parametrize(("text", "calls", "issues"), BINDING + CONVERSION + SHOWN)
def test_arguments(text: str, calls: Calls, issues: tuple[str, ...]) -> None:
    parsed = parse_text_actions(text, FUNCTIONS)
    assert [(call.name, call.arguments) for call in parsed.calls] == calls
    assert parsed.issues == issues
