"""The port between memory's extraction call and the features' tools in it: a tool that
reads no lines is left out of the briefing, one whose brief fails costs a log line and
nothing else, and every brief shown hears that its call was answered."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pallas.product.llm.tools.extraction_tools import (
    ExtractionBrief,
    gather_briefs,
    tell_answered,
)
from pallas.providers.results import ToolCall
from pallas.store.conversation import WindowLine

NOW = datetime(2026, 12, 6, tzinfo=UTC)


class Taking:
    name = "plain.take"
    instruction = "-"

    def spec(self) -> dict[str, Any]:
        return {}

    async def take(
        self, call: ToolCall, lines: Sequence[WindowLine], stream_id: int, now: datetime
    ) -> bool:
        return False


class Briefing(Taking):
    def __init__(self, name: str, fails: bool = False) -> None:
        self.name = name
        self.fails = fails
        self.heard: list[ExtractionBrief] = []

    async def brief(
        self, new_lines: Sequence[WindowLine], stream_id: int, now: datetime
    ) -> ExtractionBrief | None:
        if self.fails:
            raise RuntimeError("broken")
        return ExtractionBrief(self.name, {"stream": stream_id})

    async def answered(self, brief: ExtractionBrief, stream_id: int) -> None:
        if self.fails:
            raise RuntimeError("broken")
        self.heard.append(brief)


async def test_briefs_are_gathered_from_the_tools_that_brief_and_hear_the_answer() -> None:
    good, broken = Briefing("good"), Briefing("broken", fails=True)
    briefs = await gather_briefs([Taking(), broken, good], [], 7, NOW)
    assert [(tool.name, brief.data) for tool, brief in briefs] == [("good", {"stream": 7})]
    await tell_answered([*briefs, (broken, ExtractionBrief("broken", None))], 7)
    assert good.heard == [briefs[0][1]]
