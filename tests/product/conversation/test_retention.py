"""Retention's decision (the cutoffs, pure) and a run over a real store: every table down to
its cutoff, held messages kept, a failing holder keeping every message for that run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.retention import (
    Cutoffs,
    RetentionDeps,
    RetentionHolders,
    RetentionPolicy,
    cutoffs,
    run_retention,
)
from pallas.store.models import Event, LlmCall, Message
from pallas.store.retention import Holds, RetentionStore
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import message

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_cutoffs_are_now_minus_the_days_and_zero_keeps_forever() -> None:
    policy = RetentionPolicy(messages_days=180, events_days=0, model_calls_days=7, call_log_days=1)
    assert cutoffs(policy, NOW) == Cutoffs(
        messages=NOW - timedelta(days=180),
        events=None,
        model_calls=NOW - timedelta(days=7),
        call_log=NOW - timedelta(days=1),
    )
    assert cutoffs(RetentionPolicy(0, 0, 0, 0), NOW) == Cutoffs(None, None, None, None)


def test_the_defaults_keep_lines_half_a_year_and_the_trail_three_months() -> None:
    assert RetentionPolicy() == RetentionPolicy(180, 90, 90, 30)


def test_a_holder_is_registered_once() -> None:
    holders = RetentionHolders()

    async def nothing() -> Holds:
        return Holds()

    holders.hold("memory", nothing)
    with pytest.raises(ValueError, match="memory"):
        holders.hold("memory", nothing)
    assert holders.names() == ["memory"]


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def filled(engine: AsyncEngine) -> AsyncIterator[list[int]]:
    """Three messages 200 days old and one from today, with their inbound events; model calls
    of both ages."""
    clock = Clock(NOW - timedelta(days=200))
    writer = TimelineWriter(engine, clock=clock)
    writer.start()
    said = []
    for n, age in enumerate((200, 200, 200, 0)):
        clock.now = NOW - timedelta(days=age, minutes=-n)
        written = await writer.write(message("x", time=clock.now))
        assert isinstance(written, MessageWritten)
        said.append(written.message_id)
    await writer.close()
    async with engine.begin() as conn:
        for age in (200, 0):
            await conn.execute(
                insert(LlmCall).values(
                    created_at=NOW - timedelta(days=age),
                    purpose="chat",
                    model_type="chat",
                    model="m",
                    upstream_model="m",
                    provider="p",
                    outcome="ok",
                )
            )
    yield said


def deps(
    engine: AsyncEngine,
    holders: RetentionHolders,
    policy: RetentionPolicy,
    pruned_logs: list[datetime],
) -> RetentionDeps:
    async def current() -> RetentionPolicy:
        return policy

    async def prune_call_log(cutoff: datetime) -> int:
        pruned_logs.append(cutoff)
        return 0

    return RetentionDeps(
        RetentionStore(engine),
        holders,
        current,
        prune_call_log,
        lambda: NOW,
        batch_rows=2,
        pause_s=0,
    )


async def counts(engine: AsyncEngine) -> tuple[list[int], int, int]:
    async with engine.connect() as conn:
        messages = list((await conn.execute(select(Message.id).order_by(Message.id))).scalars())
        events = await conn.scalar(select(func.count()).select_from(Event))
        calls = await conn.scalar(select(func.count()).select_from(LlmCall))
    return messages, int(events or 0), int(calls or 0)


async def test_a_run_prunes_every_table_to_its_cutoff_and_keeps_what_is_held(
    engine: AsyncEngine, filled: list[int]
) -> None:
    holders = RetentionHolders()

    async def memory() -> Holds:
        return Holds(message_ids=frozenset({filled[1]}))

    holders.hold("memory", memory)
    logs: list[datetime] = []
    report = await run_retention(deps(engine, holders, RetentionPolicy(), logs))
    assert await counts(engine) == ([filled[1], filled[3]], 1, 1)
    assert [(p.table, p.deleted) for p in report.passes] == [
        ("event", 3),
        ("outbox", 0),
        ("message", 2),
        ("llm_call", 1),
    ]
    assert report.finished and report.messages_held == 1
    assert logs == [NOW - timedelta(days=30)]
    again = await run_retention(deps(engine, holders, RetentionPolicy(), logs))
    assert sum(p.deleted for p in again.passes) == 0  # idempotent: nothing left to do


async def test_a_failing_holder_keeps_every_message_for_that_run(
    engine: AsyncEngine, filled: list[int]
) -> None:
    holders = RetentionHolders()

    async def broken() -> Holds:
        raise RuntimeError("memory store unavailable")

    holders.hold("memory", broken)
    report = await run_retention(deps(engine, holders, RetentionPolicy(), []))
    messages, events, calls = await counts(engine)
    assert messages == filled and (events, calls) == (1, 1)
    assert "message" not in [p.table for p in report.passes]


async def test_zero_days_keeps_everything(engine: AsyncEngine, filled: list[int]) -> None:
    logs: list[datetime] = []
    forever = RetentionPolicy(0, 0, 0, 0)
    report = await run_retention(deps(engine, RetentionHolders(), forever, logs))
    assert report.passes == () and logs == []
    assert await counts(engine) == (filled, 4, 2)
