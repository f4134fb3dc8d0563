"""One turn's tools: what is offered, and running a call (activations stored as it goes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pallas.product.llm.assembler.context import PreparedTurn
from pallas.product.llm.assembler.tools import select_tools
from pallas.product.llm.tool_loop import ToolLoopDeps, ToolRun, TurnTools, run_tool_call
from pallas.product.llm.tools.base import Conversation, ToolContext, ToolSpec
from pallas.store.capabilities import activate, active_tools

# A tool brought in by `tools.find` stays for this long in that conversation.
ACTIVATION_TTL = timedelta(minutes=30)


@dataclass
class TurnToolbox:
    deps: ToolLoopDeps
    tools: TurnTools
    context: ToolContext

    @classmethod
    async def open(
        cls,
        deps: ToolLoopDeps,
        turn: PreparedTurn,
        conversation: Conversation,
        now: datetime,
    ) -> TurnToolbox:
        engine = deps.book.engine
        snapshot = await deps.book.snapshot()
        activated = await active_tools(engine, turn.stream_id, now)
        candidates = deps.book.candidates(snapshot, conversation)
        text = "\n".join(line.text for line in turn.batch)
        offer = select_tools(candidates, text, activated)
        context = ToolContext(
            conversation=conversation,
            turn_id=turn.turn_id,
            watermark=turn.watermark,
            engine=engine,
            now=now,
            visible_message_ids=tuple(line.message_id for line in turn.lines),
            asker_user_ids=tuple(
                dict.fromkeys(line.user_id for line in turn.batch if not line.from_bot)
            ),
        )
        return cls(deps, TurnTools(offer, snapshot), context)

    def specs(self) -> tuple[ToolSpec, ...]:
        """Offered at the start of the turn, then whatever `tools.find` brought in."""
        offered = self.tools.offer.tools
        names = {spec.name for spec in offered}
        extra = []
        for name in sorted(self.tools.activated - names):
            tool = self.deps.book.registry.get(name)
            if tool is not None:
                extra.append(tool.spec)
        return (*offered, *extra)

    @property
    def call_available(self) -> bool:
        return self.tools.offer.call_available

    async def run(self, wire: str, arguments: Mapping[str, Any] | None) -> ToolRun:
        result = await run_tool_call(wire, arguments, self.tools, self.context, self.deps)
        if result.activated:
            until = self.context.now + ACTIVATION_TTL
            stream_id = self.context.conversation.stream_id
            await activate(self.deps.book.engine, stream_id, result.activated, until)
            self.tools.activated |= set(result.activated)
        return result
