"""The function specs the text-protocol tests parse against: the terminal actions and a
`remember` tool with every parameter type."""

from __future__ import annotations

from pallas.product.llm.agent.text_protocol import FunctionSpec, ParamSpec, ParamType

REPLY = FunctionSpec(
    "reply",
    (
        ParamSpec("text", ParamType.STR, required=True),
        ParamSpec("target_message_id", ParamType.INT),
    ),
)
SILENT = FunctionSpec("silent", (ParamSpec("reason", ParamType.STR, required=True),))
WAIT = FunctionSpec("wait", (ParamSpec("seconds", ParamType.INT),))
REMEMBER = FunctionSpec(
    "remember",
    (
        ParamSpec("fact", ParamType.STR, required=True),
        ParamSpec("important", ParamType.BOOL),
        ParamSpec("weight", ParamType.FLOAT),
    ),
)
