"""The turn kernel's start-up queries on a real store: which retry marks are still owed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store import kernel_state
from pallas.store.audit import EventKind
from pallas.store.ledger import ConsumeMessages, LedgerEvent, LedgerWriter
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import group, message

SINCE = datetime.now(UTC) - timedelta(hours=1)


def _mark(turn_id: int, stream_id: int, ids: list[int]) -> LedgerEvent:
    return LedgerEvent(
        EventKind.TURN_INTERRUPTED,
        stream_id,
        reason="retry",
        turn_id=turn_id,
        message_id=max(ids),
        payload={"message_ids": ids, "recovered": True},
    )


def _started(turn_id: int, stream_id: int, ids: list[int]) -> LedgerEvent:
    return LedgerEvent(
        EventKind.TURN_STARTED, stream_id, turn_id=turn_id, payload={"message_ids": ids}
    )


async def _stored(writer: TimelineWriter, *texts: str) -> tuple[int, list[int]]:
    written = [await writer.write(message(t, stream=group("k1"), mentions=())) for t in texts]
    assert all(isinstance(w, MessageWritten) for w in written)
    return written[0].stream_id, [w.message_id for w in written]  # type: ignore[union-attr]


async def test_every_message_a_retry_mark_names_counts_as_run_again(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    stream_id, (a, b, c) = await _stored(writer, "一", "二", "三")
    ledger = LedgerWriter(engine)
    ledger.start()
    try:
        await ledger.write(_started(1, stream_id, [a, b]), _mark(1, stream_id, [a, b]))
    finally:
        await ledger.close()
    assert await kernel_state.retried_before(engine, [a], SINCE, stream_id)  # not its newest
    assert await kernel_state.retried_before(engine, [b, c], SINCE)
    assert not await kernel_state.retried_before(engine, [c], SINCE, stream_id)


async def test_a_retry_mark_is_owed_until_a_later_turn_takes_or_a_give_up_ends_it(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    stream_id, (a, b) = await _stored(writer, "一", "二")
    ledger = LedgerWriter(engine)
    ledger.start()

    async def owed() -> list[tuple[int, tuple[int, ...]]]:
        return [
            (o.mark.turn_id, o.message_ids) for o in await kernel_state.owed_retries(engine, SINCE)
        ]

    try:
        await ledger.write(ConsumeMessages(1, (a, b)), _started(1, stream_id, [a, b]))
        # The mark committed without its give-back: the messages still name the marked turn.
        await ledger.write(_mark(1, stream_id, [a, b]))
        assert await owed() == [(1, (a, b))]
        await ledger.write(ConsumeMessages(None, (a, b)))
        assert await owed() == [(1, (a, b))]
        await ledger.write(ConsumeMessages(2, (a,)), _started(2, stream_id, [a]))
        assert await owed() == [(1, (b,))]  # the retry took `a`
        await ledger.write(ConsumeMessages(None, (a,)))  # ... and gave it back (it waits)
        assert await owed() == [(1, (b,))]
        given_up = LedgerEvent(
            EventKind.TURN_INTERRUPTED, stream_id, reason="given_up", message_id=b
        )
        await ledger.write(given_up)
        assert await owed() == []
    finally:
        await ledger.close()
