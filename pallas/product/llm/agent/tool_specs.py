"""How the frame's actions are offered to the model: native tool schemas or text signatures.

One table describes each action once; both protocols are rendered from it, so a model with
native tool calling and one without see the same actions, arguments and descriptions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pallas.core.actions import REACTIONS
from pallas.product.llm.agent.actions import Action, DecisionFrame
from pallas.product.llm.agent.text_protocol import FunctionSpec, ParamSpec, ParamType
from pallas.product.llm.tools.base import ToolSpec
from pallas.product.llm.tools.registry import to_wire


@dataclass(frozen=True)
class Param:
    name: str
    type: ParamType
    description: str
    required: bool = False


@dataclass(frozen=True)
class ActionSpec:
    action: Action
    description: str
    params: tuple[Param, ...]


_JSON_TYPES = {
    ParamType.STR: "string",
    ParamType.INT: "integer",
    ParamType.BOOL: "boolean",
    ParamType.FLOAT: "number",
}


CALL_SPEC = ToolSpec(
    name="call",
    description="调用不常用的功能（先用 tools.find 找到它的名字）。",
    parameters={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "功能名"},
            "arguments": {"type": "object", "description": "该功能的参数"},
        },
        "required": ["name"],
    },
)


def action_specs(frame: DecisionFrame) -> tuple[ActionSpec, ...]:
    """The specs of the frame's terminal actions, in a fixed order."""
    order = [Action.REPLY, Action.SILENT, Action.WAIT, Action.REACT, Action.POKE]
    return tuple(_SPECS[action] for action in order if action in frame.actions)


def offered_tools(
    frame: DecisionFrame, tools: Sequence[ToolSpec], call_available: bool
) -> tuple[ToolSpec, ...]:
    """The non-terminal tools of this round: none once the tool budget is spent."""
    if frame.tool_calls_left <= 0:
        return ()
    return (*tools, CALL_SPEC) if call_available else tuple(tools)


def tool_schemas(frame: DecisionFrame, tools: Sequence[ToolSpec] = ()) -> list[dict[str, Any]]:
    """OpenAI Chat Completions `tools`: the terminal actions, then the offered tools."""
    actions = [_tool(spec) for spec in action_specs(frame)]
    return actions + [_registry_tool(spec) for spec in tools]


def text_functions(
    frame: DecisionFrame, tools: Sequence[ToolSpec] = ()
) -> tuple[list[FunctionSpec], dict[str, str]]:
    """The same for the text protocol: signatures and descriptions."""
    specs = action_specs(frame)
    functions = [
        FunctionSpec(
            spec.action.value,
            tuple(ParamSpec(p.name, p.type, p.required) for p in spec.params),
        )
        for spec in specs
    ]
    descriptions = {spec.action.value: spec.description for spec in specs}
    for tool in tools:
        functions.append(_text_function(tool))
        descriptions[to_wire(tool.name)] = tool.description
    return functions, descriptions


def _text_function(spec: ToolSpec) -> FunctionSpec:
    properties = spec.parameters.get("properties") or {}
    required = set(spec.parameters.get("required") or ())
    params = tuple(
        ParamSpec(name, _TEXT_TYPES.get(str(schema.get("type")), ParamType.STR), name in required)
        for name, schema in properties.items()
    )
    return FunctionSpec(to_wire(spec.name), params)


def _registry_tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": to_wire(spec.name),
            "description": spec.description,
            "parameters": dict(spec.parameters),
        },
    }


def _tool(spec: ActionSpec) -> dict[str, Any]:
    properties = {
        p.name: {"type": _JSON_TYPES[p.type], "description": p.description} for p in spec.params
    }
    return {
        "type": "function",
        "function": {
            "name": spec.action.value,
            "description": spec.description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": [p.name for p in spec.params if p.required],
            },
        },
    }


_TEXT_TYPES = {
    "string": ParamType.STR,
    "integer": ParamType.INT,
    "boolean": ParamType.BOOL,
    "number": ParamType.FLOAT,
}

_REACTION_NAMES = "、".join(REACTIONS)

_SPECS = {
    Action.REPLY: ActionSpec(
        Action.REPLY,
        "在这个会话里说话（结束本轮）。text 就是要发出的话，可以分几行，每行一个气泡。"
        "想用表情包表态时，在 text 里写 [表情:情绪]（只表态就只写它，比如 [表情:哈哈]），"
        "会换成一张合适的表情包。",
        (
            Param("text", ParamType.STR, "要发出的话", required=True),
            Param(
                "target_message_id",
                ParamType.INT,
                "回应的是哪条消息（本批消息的编号，不带 #）；不确定就不填",
            ),
        ),
    ),
    Action.SILENT: ActionSpec(
        Action.SILENT,
        "这次不说话（结束本轮）。看过了、决定不接，是正常的选择。",
        (Param("reason", ParamType.STR, "为什么不说话，一句话", required=True),),
    ),
    Action.WAIT: ActionSpec(
        Action.WAIT,
        "对方好像还没说完，等一等再决定（结束本轮；有新消息时再看）。",
        (Param("seconds", ParamType.INT, "大概等多少秒"),),
    ),
    Action.REACT: ActionSpec(
        Action.REACT,
        f"给一条消息贴一个表情回应，不说话（结束本轮）。emoji 只能是：{_REACTION_NAMES}。",
        (
            Param("message_id", ParamType.INT, "本批消息的编号", required=True),
            Param("emoji", ParamType.STR, "表情回应的名字", required=True),
        ),
    ),
    Action.POKE: ActionSpec(
        Action.POKE,
        "戳一戳本批消息的某个发送者，不说话（结束本轮）。",
        (Param("user_id", ParamType.STR, "对方的 uid", required=True),),
    ),
}
