"""The after-turn observer on a real job table: one extraction run per chat and time slot, a
later slot once that run has started, nothing for failed or dropped turns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.conversation.turns.observers import TurnEnded, TurnEnding
from pallas.product.memory.config import MemoryConfig
from pallas.product.memory.extraction import EXTRACT_KIND, MemoryObserver
from pallas.store.jobs import JobStore
from pallas.store.models import Job
from tests.support.inbound import group

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)  # the start of a 30 s slot


def ended(seconds: float, ending: TurnEnding = TurnEnding.DONE, stream_id: int = 1) -> TurnEnded:
    return TurnEnded(7, stream_id, group("g"), (1,), ending, T0 + timedelta(seconds=seconds))


async def runs(engine: AsyncEngine) -> list[tuple[int, datetime]]:
    query = select(Job.payload, Job.due_at).where(Job.kind == EXTRACT_KIND).order_by(Job.id)
    async with engine.connect() as conn:
        return [(row.payload["stream_id"], row.due_at) for row in await conn.execute(query)]


async def test_turns_close_together_share_a_run_and_a_started_run_passes_on(
    engine: AsyncEngine,
) -> None:
    jobs = Jobs(JobStore(engine), lambda: T0)
    jobs.handle(EXTRACT_KIND, lambda _job: None)  # type: ignore[arg-type, return-value]
    observer = MemoryObserver(jobs, lambda: MemoryConfig(extraction_delay_s=10))
    await observer.turn_ended(ended(1))
    await observer.turn_ended(ended(5))  # due 15 s: the same slot
    await observer.turn_ended(ended(3, stream_id=2))  # another chat: its own run
    await observer.turn_ended(ended(4, TurnEnding.FAILED))
    await observer.turn_ended(ended(4, TurnEnding.DROPPED))
    assert await runs(engine) == [(1, T0 + timedelta(seconds=11)), (2, T0 + timedelta(seconds=13))]
    [claimed, _] = await jobs.store.claim(
        "w", T0 + timedelta(seconds=20), lease=timedelta(minutes=1), limit=2
    )
    assert claimed.payload == {"stream_id": 1}
    await observer.turn_ended(ended(8))  # that slot's run has started: the next slot
    assert (await runs(engine))[-1] == (1, T0 + timedelta(seconds=30))
    await observer.turn_ended(ended(9))  # still pending: joins it
    assert len(await runs(engine)) == 3
