"""The ledger writer on a real store: patient records share a transaction, order is kept."""

from __future__ import annotations

import asyncio

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.audit import EventKind
from pallas.store.ledger import LedgerEvent, LedgerWriter
from pallas.store.models import Event
from tests.support.engine_events import EngineEvents


def _event(reason: str) -> LedgerEvent:
    return LedgerEvent(EventKind.GATE_DROPPED, None, reason=reason)


async def _reasons(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        query = select(Event.reason).order_by(Event.id)
        return list((await conn.execute(query)).scalars())


async def test_patient_records_a_moment_apart_share_one_transaction(engine: AsyncEngine) -> None:
    ledger = LedgerWriter(engine)
    ledger.start()
    commits = EngineEvents(engine, "commit")
    try:
        for n in range(3):
            ledger.record_soon(_event(f"soon-{n}"))
            await asyncio.sleep(0.01)  # a slow, steady pace: each alone would commit alone
        await ledger.flush()
    finally:
        commits.close()
        await ledger.close()
    assert await _reasons(engine) == ["soon-0", "soon-1", "soon-2"]
    assert commits.count == 1


async def test_a_write_behind_patient_records_ends_their_wait_and_keeps_the_order(
    engine: AsyncEngine,
) -> None:
    ledger = LedgerWriter(engine)
    ledger.start()
    commits = EngineEvents(engine, "commit")
    try:
        ledger.record_soon(_event("decided"))
        await ledger.write(_event("written"))
        written = commits.count
        ledger.record_soon(_event("decided again"))
        ledger.record(_event("recorded"))
        await ledger.flush()
    finally:
        commits.close()
        await ledger.close()
    assert await _reasons(engine) == ["decided", "written", "decided again", "recorded"]
    assert (written, commits.count) == (1, 2)


async def test_closing_commits_what_is_still_waiting(engine: AsyncEngine) -> None:
    ledger = LedgerWriter(engine)
    ledger.start()
    ledger.record_soon(_event("last words"))
    await ledger.close()
    assert await _reasons(engine) == ["last words"]
    ledger.record_soon(_event("too late"))  # logged as lost, never raised
    assert await _reasons(engine) == ["last words"]
