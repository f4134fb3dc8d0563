"""End to end: the real bot decides who gets a turn, and the ledger says why."""

from __future__ import annotations

from tests.support.fake_napcat import FakeNapCat, at, text
from tests.support.timeline_db import TimelineDb, wait_for


def _event_for(timeline: TimelineDb, kind: str, message_id: int) -> list:
    return timeline.query(
        "SELECT e.* FROM event e JOIN message m ON m.id = e.message_id "
        "WHERE e.kind = ? AND m.platform_message_id = ?",
        kind,
        str(message_id),
    )


async def test_an_at_gets_a_turn_and_chatter_is_seen_not_answered(
    napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    called = napcat.group_message(9501, 321, [at(napcat.self_id), text(" 你好")])
    chatter = napcat.group_message(9501, 322, "今天天气不错")
    await napcat.send_event(called)
    await napcat.send_event(chatter)
    started = await wait_for(
        lambda: _event_for(timeline, "turn_started", called["message_id"]), what="turn for the @"
    )
    assert started[0]["reason"] == "mentioned" and started[0]["turn_id"] is not None
    dropped = await wait_for(
        lambda: _event_for(timeline, "gate_dropped", chatter["message_id"]),
        what="drop record for chatter",
    )
    assert dropped[0]["reason"] == "attention_filtered" and dropped[0]["turn_id"] is None
    assert _event_for(timeline, "turn_started", chatter["message_id"]) == []


async def test_a_private_message_is_always_a_turn(napcat: FakeNapCat, timeline: TimelineDb) -> None:
    event = napcat.private_message(654, "在吗")
    await napcat.send_event(event)
    started = await wait_for(
        lambda: _event_for(timeline, "turn_started", event["message_id"]), what="private turn"
    )
    assert started[0]["reason"] == "direct_conversation"
