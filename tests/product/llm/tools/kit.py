"""Small tools for testing the registry and the tool loop."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pallas.product.llm.tools.base import (
    Availability,
    Conversation,
    Tool,
    ToolContext,
    ToolOutput,
    ToolSpec,
    ToolTag,
    Visibility,
)

OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


class EchoTool(Tool):
    def __init__(
        self,
        name: str = "test.echo",
        *,
        visibility: Visibility = Visibility.VISIBLE,
        domains: tuple[str, ...] = ("general",),
        hints: tuple[str, ...] = (),
        tags: frozenset[ToolTag] = frozenset(),
        essential: bool = False,
        timeout_s: float = 2.0,
    ) -> None:
        self.spec = ToolSpec(
            name=name,
            description=f"回声：{name}",
            parameters={
                "type": "object",
                "properties": {"word": {"type": "string"}, "times": {"type": "integer"}},
                "required": ["word"],
            },
            tags=tags,
            domains=domains,
            hints=hints,
            visibility=visibility,
            timeout_s=timeout_s,
            essential=essential,
        )
        self.calls: list[dict[str, Any]] = []

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        self.calls.append(dict(arguments))
        return ToolOutput({"echo": str(arguments["word"]) * int(arguments.get("times", 1))})


class HangingTool(EchoTool):
    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


class BrokenTool(EchoTool):
    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        raise RuntimeError("database on fire")


class HugeTool(EchoTool):
    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        return ToolOutput({"blob": "字" * 5_000_000})


class NeedsKeyTool(EchoTool):
    def can_enable(self) -> Availability:
        return Availability.no("未配置测试密钥")


class ExplodingCheckTool(EchoTool):
    def can_enable(self) -> Availability:
        raise RuntimeError("probe failed")


class GroupOnlyTool(EchoTool):
    def is_available_for(self, conversation: Conversation) -> bool:
        return conversation.kind.value == "group"
