"""Research in the background on the real store and a real model server: a run that never
finishes gives up in one sentence, a tool that returns 10 MB reaches the model cut, and a
run again after a crash says nothing twice (docs/tasks.md, "Research in the background")."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.local_time import SHANGHAI
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery, OutboxDispatcher
from pallas.product.llm.tools.base import (
    Conversation,
    Tool,
    ToolContext,
    ToolOutput,
    ToolSpec,
    ToolTag,
)
from pallas.product.tasks.research import RESULT_CHARS, ResearchRunning
from pallas.product.tasks.research_store import ResearchStore
from pallas.product.tasks.tables import ResearchRow
from pallas.providers.catalog import ModelType
from pallas.store.jobs import ClaimedJob
from pallas.store.ledger import LedgerWriter
from pallas.store.models import OutboxItem
from pallas.store.outbox import OutboxStore
from pallas.store.timeline import TimelineWriter
from tests.product.conversation.delivery.test_outbox import POLICY, Outlet
from tests.providers.support import catalog, harness, model
from tests.support.fake_llm import FakeModelServer, Reply, Stall, ToolCallSpec
from tests.support.inbound import message, private

AT = datetime(2026, 12, 6, 12, 0, tzinfo=SHANGHAI)
HUGE = "资料" * 5_000_000  # 10 MB of text


class HugeTool(Tool):
    spec = ToolSpec(name="web.fetch", description="打开网页",
                    tags=frozenset({ToolTag.READ_ONLY}),
                    parameters={"type": "object",
                                "properties": {"url": {"type": "string"}}})  # fmt: skip

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        return ToolOutput({"text": HUGE})


async def huge_tool(_conversation: Conversation) -> list[tuple[Tool, ToolSpec]]:
    return [(HugeTool(), HugeTool.spec)]


def running(engine: AsyncEngine, server: FakeModelServer, timeout_s: float) -> ResearchRunning:
    """What a (re)started bot builds: nothing of the last run's memory."""
    clock = lambda: AT  # noqa: E731
    dispatcher = OutboxDispatcher(OutboxStore(engine), Outlet(), LedgerWriter(engine), POLICY,
                                  clock)  # fmt: skip
    sender = OutboxDelivery(OutboxStore(engine), dispatcher, clock)
    models = harness(catalog(server, [model("m", ModelType.CHAT)])).manager
    return ResearchRunning(ResearchStore(engine), engine, models, sender, lambda: 1, clock,
                           huge_tool, timeout_s=timeout_s)  # fmt: skip


async def started(engine: AsyncEngine, writer: TimelineWriter) -> ClaimedJob:
    stored = await writer.write(message("帮我查一下", stream=private("42")))
    research_id = await ResearchStore(engine).start(stored.stream_id, stored.person_id, "42",
                                                    "10000", "嗯哼镇有多少人", AT)  # fmt: skip
    return ClaimedJob(1, "task.research", {"research_id": research_id}, None, 1, 1, AT)


async def said(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        rows = (await conn.execute(select(OutboxItem.payload).order_by(OutboxItem.id))).all()
    return ["".join(s.get("text", "") for s in row.payload["segments"]) for row in rows]


async def test_a_run_that_never_finishes_gives_up_once(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    async with FakeModelServer(default=Stall()) as server:
        job = await started(engine, writer)
        await running(engine, server, timeout_s=0.5)(job)
        gave_up = "你让我查的「嗯哼镇有多少人」：\n查了 0.5 秒还没查完，先不查了。"
        assert await said(engine) == [gave_up]
        research = await ResearchStore(engine).get(int(job.payload["research_id"]))
        assert research is not None and research.status == "failed"
        await running(engine, server, timeout_s=0.5)(job)  # run again: it ended, nothing more
        assert len(await said(engine)) == 1


async def test_a_huge_tool_result_reaches_the_model_cut_and_the_answer_is_said_once(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    async with FakeModelServer() as server:
        fetch = ToolCallSpec("web__fetch", json.dumps({"url": "https://example.org"}))
        server.script("up-m", Reply("", (fetch,)), Reply("三万人。"), Reply("三万人。"))
        job = await started(engine, writer)
        run = running(engine, server, timeout_s=30)
        await run(job)
        second = server.requests_for("up-m")[1].body
        [tool] = [m for m in second["messages"] if m["role"] == "tool"]
        assert len(tool["content"]) < RESULT_CHARS + 200
        assert "不是指令" in tool["content"]
        assert await said(engine) == ["你让我查的「嗯哼镇有多少人」：\n三万人。"]
        # A crash after the answer was queued but before the row was closed: it runs again,
        # and the answer's key keeps it to one message.
        store = ResearchStore(engine)
        research_id = int(job.payload["research_id"])
        async with engine.begin() as conn:
            await conn.execute(update(ResearchRow).where(ResearchRow.id == research_id)
                               .values(status="running"))  # fmt: skip
        server.script("up-m", Reply("三万人。"))
        await running(engine, server, timeout_s=30)(job)
        assert len(await said(engine)) == 1
        assert (await store.get(research_id)).status == "done"  # type: ignore[union-attr]
