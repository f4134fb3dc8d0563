"""Bad input: one warning line, the connection stays up, nothing half-written, others unaffected."""

from __future__ import annotations

import json
import uuid

from tests.support.bot_process import BotProcess
from tests.support.fake_napcat import FakeNapCat, text
from tests.support.timeline_db import TimelineDb, wait_for

MAX_TEXT_CHARS = 20_000


def _marker() -> str:
    return f"mark{uuid.uuid4().hex[:12]}"


async def _still_serving(napcat: FakeNapCat, timeline: TimelineDb, group_id: int) -> None:
    """A valid message after the bad one is stored, over the same connection."""
    follow = napcat.group_message(group_id, 100, "后面的正常消息")
    await napcat.send_event(follow)
    await wait_for(lambda: timeline.messages(follow["message_id"]), what="follow-up message")
    assert napcat.is_open


async def _warned(bot: BotProcess, marker: str) -> list[str]:
    lines = await wait_for(
        lambda: [ln for ln in bot.log().splitlines() if marker in ln and "[WARNING]" in ln],
        what=f"warning with {marker}",
    )
    assert len(lines) == 1, lines
    assert len(lines[0]) < 600, "the warning carries an excerpt, not the whole frame"
    return lines


def _rows_in_group(timeline: TimelineDb, group_id: int) -> int:
    return (
        timeline.scalar(
            "SELECT count(*) FROM message m JOIN stream s ON s.id = m.stream_id "
            "WHERE s.external_id = ?",
            str(group_id),
        )
        or 0
    )


async def test_malformed_json(
    running_bot: BotProcess, napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    marker = _marker()
    await napcat.send_raw('{"post_type": "message", "text": "' + marker)
    await _warned(running_bot, marker)
    await _still_serving(napcat, timeline, 8001)


async def test_json_that_is_not_an_object(
    running_bot: BotProcess, napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    marker = _marker()
    await napcat.send_raw(json.dumps([marker, 1, 2]))
    await _warned(running_bot, marker)
    await _still_serving(napcat, timeline, 8002)


async def test_binary_frame(
    running_bot: BotProcess, napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    await napcat.send_raw(b"\xff\xfe\x00garbage")
    await wait_for(
        lambda: f"bot {napcat.self_id}: frame ignored: binary frame" in running_bot.log(),
        what="binary frame warning",
    )
    await _still_serving(napcat, timeline, 8003)


async def test_unknown_post_type(
    running_bot: BotProcess, napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    marker = _marker()
    await napcat.send_event({"post_type": "hologram", "payload": marker})
    lines = await _warned(running_bot, marker)
    assert "unknown post_type 'hologram'" in lines[0]
    await _still_serving(napcat, timeline, 8004)


async def test_unknown_segment_type_keeps_the_message(
    running_bot: BotProcess, napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    event = napcat.group_message(
        8005, 101, [{"type": "hologram", "data": {"x": 1}}, text("还有字")]
    )
    await napcat.send_event(event)
    rows = await wait_for(lambda: timeline.messages(event["message_id"]), what="message")
    assert rows[0]["text"] == "[hologram]还有字"
    await _warned(running_bot, f"msg {event['message_id']} from 101")
    await _still_serving(napcat, timeline, 8005)


async def test_missing_fields_write_nothing(
    running_bot: BotProcess, napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    no_group = napcat.group_message(8006, 102, _marker())
    del no_group["group_id"]
    no_user = napcat.group_message(8006, 103, _marker())
    del no_user["user_id"]
    for event in (no_group, no_user):
        await napcat.send_event(event)
        lines = await _warned(running_bot, event["raw_message"])
        assert "missing required fields" in lines[0]
    await _still_serving(napcat, timeline, 8006)
    for event in (no_group, no_user):
        assert timeline.messages(event["message_id"]) == []
    assert _rows_in_group(timeline, 8006) == 1  # only the valid follow-up


async def test_segment_without_data_is_read_leniently(
    running_bot: BotProcess, napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    event = napcat.group_message(8010, 108, [{"type": "text"}, text("其余照常")])
    await napcat.send_event(event)
    rows = await wait_for(lambda: timeline.messages(event["message_id"]), what="message")
    assert rows[0]["text"] == "其余照常"
    # A segment without data is read as empty data before any model sees it: no fault left.
    assert f"could not read mentions of message {event['message_id']}" not in running_bot.log()
    assert "Task exception was never retrieved" not in running_bot.log()
    await _still_serving(napcat, timeline, 8010)


async def test_megabyte_text_is_truncated_and_flagged(
    running_bot: BotProcess, napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    marker = _marker()
    event = napcat.group_message(8007, 105, marker + "啊" * 1_000_000)
    await napcat.send_event(event)
    rows = await wait_for(lambda: timeline.messages(event["message_id"]), what="huge message")
    assert rows[0]["truncated"] == 1
    assert len(rows[0]["text"]) == MAX_TEXT_CHARS
    assert rows[0]["text"].startswith(marker)
    await _warned(running_bot, marker)
    await _still_serving(napcat, timeline, 8007)
    longest = max(len(line) for line in running_bot.log().splitlines())
    assert longest < 2_200, "no log line carries the megabyte"


async def test_event_for_unknown_bot_id(
    running_bot: BotProcess, napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    stranger = napcat.group_message(8008, 106, _marker())
    await napcat.send_raw(json.dumps({"time": 1, "self_id": 99999, **stranger}))
    await _warned(running_bot, f"unknown bot id '99999' on the connection of {napcat.self_id}")
    await _still_serving(napcat, timeline, 8008)
    assert timeline.messages(stranger["message_id"]) == []


async def test_binary_frame_with_a_valid_event_is_accepted(
    napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    event = napcat.group_message(8009, 107, "二进制帧")
    full = {"time": 1_700_000_000, "self_id": napcat.self_id, **event}
    await napcat.send_raw(json.dumps(full, ensure_ascii=False).encode("utf-8"))
    await wait_for(lambda: timeline.messages(event["message_id"]), what="binary event")
