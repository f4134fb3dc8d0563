"""Every attempt leaves one accounting row in the real store; the report adds them up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from random import Random

import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.providers.catalog import ModelType, Pricing
from pallas.providers.errors import AllCandidatesFailedError
from pallas.providers.manager import ManagerDeps, ModelManager
from pallas.providers.results import CallTag, Purpose
from pallas.store.llm_usage import LlmUsageWriter, cost_report
from pallas.store.models import LlmCall, Stream
from tests.providers.support import HELLO, FakeClock, catalog, model
from tests.support.fake_llm import FakeModelServer, Reply, Status, Usage

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CHEAP = Pricing(input=1.0, output=2.0, cache_hit=0.25)
DEAR = Pricing(input=10.0, output=30.0)


async def add_stream(engine: AsyncEngine, kind: str, external_id: str) -> int:
    async with engine.begin() as conn:
        result = await conn.execute(
            insert(Stream).values(
                platform="qq", self_id="1", kind=kind, external_id=external_id, created_at=T0
            )
        )
        return int(result.inserted_primary_key[0])


async def test_cost_per_purpose_model_and_group(
    engine: AsyncEngine, model_server: FakeModelServer
) -> None:
    group_a = await add_stream(engine, "group", "1001")
    group_b = await add_stream(engine, "group", "1002")
    writer = LlmUsageWriter(engine)
    writer.start()
    clock = FakeClock()
    wall = iter(T0 + timedelta(minutes=i) for i in range(100))
    deps = ManagerDeps(
        usage=writer.record,
        monotonic=clock,
        rng=Random(1),
        sleep=clock.sleep,
        wall_clock=lambda: next(wall),
    )
    models = [model("cheap", pricing=CHEAP), model("dear", pricing=DEAR)]
    manager = ModelManager(
        catalog(model_server, models, preferred=((ModelType.CHAT, "cheap"),)), deps
    )
    model_server.script("up-cheap", Reply(usage=Usage(1000, 100, 400)), Status(500))
    model_server.script("up-dear", Reply(usage=Usage(2000, 500, 0)))
    await manager.chat(HELLO, tag=CallTag(Purpose.DECISION, stream_id=group_a))  # cheap ok
    await manager.chat(HELLO, tag=CallTag(Purpose.REPLY, stream_id=group_b))  # cheap 500, dear ok
    await manager.close()
    await writer.close()

    cheap_cost = (600 * 1.0 + 400 * 0.25 + 100 * 2.0) / 1e6
    dear_cost = (2000 * 10.0 + 500 * 30.0) / 1e6
    report = await cost_report(engine, T0, T0 + timedelta(hours=1))
    assert report.total_cost == pytest.approx(cheap_cost + dear_cost)
    by_purpose = {line.key: line for line in report.by_purpose}
    assert by_purpose["decision"].cost == pytest.approx(cheap_cost)
    assert by_purpose["reply"].cost == pytest.approx(dear_cost)
    assert (by_purpose["reply"].calls, by_purpose["reply"].failed) == (2, 1)
    by_model = {line.key: line for line in report.by_model}
    assert (by_model["cheap"].calls, by_model["cheap"].failed) == (2, 1)
    assert (by_model["cheap"].prompt_tokens, by_model["cheap"].cached_tokens) == (1000, 400)
    assert by_model["dear"].completion_tokens == 500
    by_group = {line.key: line.cost for line in report.by_group}
    assert by_group == pytest.approx({"group:1001": cheap_cost, "group:1002": dear_cost})
    assert [line.key for line in report.by_model] == ["dear", "cheap"]  # dearest first

    async with engine.connect() as conn:
        rows = (await conn.execute(select(LlmCall).order_by(LlmCall.id))).all()
    assert [(r.model, r.outcome, r.attempt) for r in rows] == [
        ("cheap", "ok", 1),
        ("cheap", "server_error", 1),
        ("dear", "ok", 2),
    ]
    assert "HTTP 500" in rows[1].error


async def test_the_report_only_counts_its_time_range(engine: AsyncEngine) -> None:
    writer = LlmUsageWriter(engine)
    writer.start()
    for minutes, cost in ((-5, 1.0), (10, 2.0), (70, 4.0)):
        async with engine.begin() as conn:
            await conn.execute(
                insert(LlmCall).values(
                    created_at=T0 + timedelta(minutes=minutes),
                    purpose="extraction",
                    model_type="chat",
                    model="m",
                    upstream_model="m",
                    provider="p",
                    outcome="ok",
                    cost=cost,
                )
            )
    await writer.close()
    report = await cost_report(engine, T0, T0 + timedelta(hours=1))
    assert report.total_cost == 2.0
    assert [(line.key, line.calls) for line in report.by_group] == [("none", 1)]


async def test_rows_of_failed_calls_are_kept_when_every_model_fails(
    engine: AsyncEngine, model_server: FakeModelServer
) -> None:
    writer = LlmUsageWriter(engine)
    writer.start()
    clock = FakeClock()
    deps = ManagerDeps(usage=writer.record, monotonic=clock, sleep=clock.sleep)
    manager = ModelManager(catalog(model_server, [model("a")]), deps)
    model_server.script("up-a", Status(503))
    with pytest.raises(AllCandidatesFailedError):
        await manager.chat(HELLO, tag=CallTag(Purpose.SUMMARY))
    await manager.close()
    await writer.flush()
    report = await cost_report(engine, T0 - timedelta(days=1), datetime.now(UTC) + timedelta(1))
    assert [(line.key, line.calls, line.failed) for line in report.by_purpose] == [
        ("summary", 1, 1)
    ]
    await writer.close()
