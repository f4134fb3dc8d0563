"""Making a summary on the real store and a real model server: a window longer than one call
reads is summarized in chunks and merged, capped at the newest lines, and said once
(docs/summaries.md, "What a summary reads")."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.local_time import SHANGHAI
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery, OutboxDispatcher
from pallas.product.summaries.making import SummaryAsk, SummaryMaking
from pallas.product.summaries.window import MAX_CHUNKS, MAX_LINES, Window
from pallas.providers.catalog import ModelType
from pallas.store.jobs import ClaimedJob
from pallas.store.ledger import LedgerWriter
from pallas.store.models import OutboxItem
from pallas.store.outbox import OutboxStore
from pallas.store.timeline import TimelineWriter
from tests.product.conversation.delivery.test_outbox import POLICY, Outlet
from tests.providers.support import catalog, harness, model
from tests.support.fake_llm import FakeModelServer, Reply
from tests.support.inbound import group, message

AT = datetime(2026, 12, 6, 20, 0, tzinfo=SHANGHAI)


def making(engine: AsyncEngine, server: FakeModelServer) -> SummaryMaking:
    clock = lambda: AT  # noqa: E731
    dispatcher = OutboxDispatcher(OutboxStore(engine), Outlet(), LedgerWriter(engine), POLICY,
                                  clock)  # fmt: skip
    sender = OutboxDelivery(OutboxStore(engine), dispatcher, clock)
    models = harness(catalog(server, [model("m", ModelType.CHAT)])).manager
    return SummaryMaking(engine, models, sender, lambda: 1, "牛牛")


async def said(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        rows = (await conn.execute(select(OutboxItem.payload).order_by(OutboxItem.id))).all()
    return [row.payload["segments"][0]["text"] for row in rows]


async def test_a_long_window_is_read_in_chunks_merged_and_capped(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    chat = group("910")
    last = None
    start = AT - timedelta(hours=2)
    for n in range(MAX_LINES + 100):
        at = start + timedelta(seconds=n)
        words = f"第{n}句：" + "今天的火锅店排队排了好久" * 3
        last = await writer.write(message(words, stream=chat, user_id=str(100 + n % 7),
                                          nickname=f"群友{n % 7}", time=at))  # fmt: skip
    assert last is not None
    async with FakeModelServer(default=Reply("大家在聊火锅。")) as server:
        ask = SummaryAsk(key="summary:1:x", stream_id=last.stream_id,
                         window=Window(hours=3, lines=MAX_LINES), up_to=last.message_id,
                         at=AT, account="10000")  # fmt: skip
        job = ClaimedJob(1, "summary.make", ask.payload(), ask.key, 1, 3, AT)
        await making(engine, server)(job)
        requests = [r.body for r in server.requests_for("up-m")]
        assert 2 < len(requests) <= MAX_CHUNKS + 1  # the chunks, then one merge
        first = requests[0]["messages"][1]["content"]
        assert "第1599句" not in first and "群友" in first
        merged = requests[-1]["messages"][1]["content"]
        assert "第 1 段" in merged and "大家在聊火锅。" in merged
        assert "第0句" not in "".join(r["messages"][1]["content"] for r in requests[:-1])
        [text] = await said(engine)
        assert text.startswith("最近 3 小时的聊天（") and "太长只看了最新的" in text
        await making(engine, server)(job)  # a run again after a crash: nothing twice
        assert len(await said(engine)) == 1
