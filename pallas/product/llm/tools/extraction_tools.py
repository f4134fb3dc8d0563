"""Tools features add to memory's extraction call (persona: relation notes; slang: a group's
words), beside `memory.remember`: a port of the core between the feature that makes the call
and those that offer tools in it. The call runs anyway after a turn; a feature's tool costs a
few tokens of schema. Each tool judges its own calls by deterministic rules.

A tool may also read each run's new lines first (`brief`) and show lines and data of its
own; a brief makes the run call the model even when memory has nothing to ask, and the tool
hears when that call was answered (`answered`), so what it counts as offered is only what a
model really saw. Both are optional: a tool without them only takes calls."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from loguru import logger

from pallas.product.llm.tools.registry import to_wire
from pallas.providers.catalog import ModelType
from pallas.providers.manager import ModelManager
from pallas.providers.results import ToolCall
from pallas.store.conversation import WindowLine


@dataclass(frozen=True)
class ExtractionBrief:
    """What a feature's tool asks to be shown in a run's call: lines beside memory's
    candidates (the model can only cite shown lines) and its own data, under `key` of the
    payload. A brief makes the run call the model even when memory has nothing to ask."""

    key: str
    data: Any
    lines: tuple[WindowLine, ...] = ()


class ExtractionTool(Protocol):
    name: str  # dotted, as everywhere (the wire name replaces "." with "__")
    instruction: str  # one line for the extraction call's system prompt

    def spec(self) -> dict[str, Any]: ...

    async def take(
        self, call: ToolCall, lines: Sequence[WindowLine], stream_id: int, now: datetime
    ) -> bool:
        """Keep what the call proposes if the rules allow it; whether it was kept."""


@runtime_checkable
class BriefingTool(ExtractionTool, Protocol):
    """An extraction tool that reads each run's new lines first."""

    async def brief(
        self, new_lines: Sequence[WindowLine], stream_id: int, now: datetime
    ) -> ExtractionBrief | None:
        """Read the run's new lines (before any model call); what to show, if anything. A
        run that fails before its call is read again by the next run: count nothing twice."""

    async def answered(self, brief: ExtractionBrief, stream_id: int) -> None:
        """The call that showed `brief` was answered (whatever the model chose)."""


def extraction_model_type(models: ModelManager) -> ModelType | None:
    """The model an extraction call uses: a planner (`tool`) model when there is one, else
    the chat model; it must call tools."""
    for model_type in (ModelType.TOOL, ModelType.CHAT):
        if models.has(model_type) and models.supports_tools(model_type):
            return model_type
    return None


def tool_named(tools: Sequence[ExtractionTool], name: str) -> ExtractionTool | None:
    return next((t for t in tools if name in (t.name, to_wire(t.name))), None)


Briefed = tuple[BriefingTool, ExtractionBrief]


async def gather_briefs(
    tools: Sequence[ExtractionTool],
    new_lines: Sequence[WindowLine],
    stream_id: int,
    now: datetime,
) -> list[Briefed]:
    """The briefs of this run, each with its tool; a tool that fails is logged and shows
    nothing, a tool that reads no lines is skipped."""
    briefing = [tool for tool in tools if isinstance(tool, BriefingTool)]
    found = await asyncio.gather(
        *(tool.brief(new_lines, stream_id, now) for tool in briefing), return_exceptions=True
    )
    briefs: list[Briefed] = []
    for tool, brief in zip(briefing, found, strict=True):
        if isinstance(brief, BaseException):
            logger.opt(exception=brief).error("extraction tool {} failed to brief", tool.name)
        elif brief is not None:
            briefs.append((tool, brief))
    return briefs


async def tell_answered(briefs: Sequence[Briefed], stream_id: int) -> None:
    for tool, brief in briefs:
        try:
            await tool.answered(brief, stream_id)
        except Exception as exc:  # one feature's failure must not cost memory its run
            logger.opt(exception=exc).error("extraction tool {} failed after the call", tool.name)


async def take_calls(
    tools: Sequence[ExtractionTool],
    calls: Sequence[ToolCall],
    lines: Sequence[WindowLine],
    stream_id: int,
    now: datetime,
) -> int:
    """Hand each call to the feature tool it names; how many were kept."""
    kept = 0
    for call in calls:
        tool = tool_named(tools, call.name)
        if tool is None:
            continue
        try:
            kept += await tool.take(call, lines, stream_id, now)
        except Exception as exc:  # one feature's failure must not cost memory its run
            logger.opt(exception=exc).error("extraction tool {} failed", tool.name)
    return kept
