"""End to end: the real bot process, a fake NapCat over a real WebSocket, the real database."""

from __future__ import annotations

import json

import httpx

from tests.support.bot_process import BotProcess
from tests.support.fake_napcat import FakeNapCat, at, image, next_message_id, reply, text
from tests.support.timeline_db import TimelineDb, wait_for


async def _stored(timeline: TimelineDb, message_id: int | str) -> dict:
    rows = await wait_for(lambda: timeline.messages(message_id), what=f"message {message_id}")
    assert len(rows) == 1
    return dict(rows[0])


async def test_group_message_is_persisted_with_stream_and_person(
    napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    event = napcat.group_message(
        7001,
        424242,
        [reply(99), at(napcat.self_id), text(" 看看这个"), image()],
        nickname="小明",
        card="明哥",
    )
    await napcat.send_event(event)
    row = await _stored(timeline, event["message_id"])
    assert row["stream_kind"] == "group"
    assert row["stream_external_id"] == "7001"
    assert row["stream_self_id"] == str(napcat.self_id)
    assert row["sender_user_id"] == "424242"
    assert row["text"] == f"@{napcat.self_id} 看看这个[图片]"
    assert row["reply_to"] == "99"
    assert json.loads(row["mentions"]) == [str(napcat.self_id)]
    assert not row["from_bot"] and not row["recalled"]
    kinds = [s["kind"] for s in json.loads(row["segments"])]
    assert kinds == ["reply", "at", "text", "image"]
    person = timeline.query("SELECT display_name FROM person WHERE id = ?", row["sender_person_id"])
    assert person[0]["display_name"] == "小明", "the platform nickname, not this group's card"
    inbound = timeline.query("SELECT * FROM event WHERE kind='inbound' AND message_id=?", row["id"])
    assert len(inbound) == 1 and inbound[0]["turn_id"] is None


async def test_same_user_in_two_groups_is_one_person(
    napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    first = napcat.group_message(7101, 515151, "在吗")
    second = napcat.group_message(7102, 515151, "在吗")
    await napcat.send_event(first)
    await napcat.send_event(second)
    a = await _stored(timeline, first["message_id"])
    b = await _stored(timeline, second["message_id"])
    assert a["stream_id"] != b["stream_id"]
    assert a["sender_person_id"] == b["sender_person_id"]


async def test_a_poke_does_not_erase_a_known_name(napcat: FakeNapCat, timeline: TimelineDb) -> None:
    said = napcat.group_message(7103, 525252, "我是有名字的", nickname="Alice")
    await napcat.send_event(said)
    await napcat.send_event(napcat.poke(7103, 525252, napcat.self_id))
    row = await _stored(timeline, said["message_id"])
    await wait_for(
        lambda: timeline.query(
            "SELECT 1 FROM message WHERE is_poke=1 AND sender_person_id=?", row["sender_person_id"]
        ),
        what="poke",
    )
    names = timeline.query("SELECT display_name FROM person WHERE id=?", row["sender_person_id"])
    assert names[0]["display_name"] == "Alice"


async def test_private_message_gets_a_private_stream(
    napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    event = napcat.private_message(616161, "私聊一下")
    await napcat.send_event(event)
    row = await _stored(timeline, event["message_id"])
    assert (row["stream_kind"], row["stream_external_id"]) == ("private", "616161")


async def test_duplicated_event_is_stored_once(napcat: FakeNapCat, timeline: TimelineDb) -> None:
    event = napcat.group_message(7201, 717171, "只说一次")
    for _ in range(3):
        await napcat.send_event(event)
    row = await _stored(timeline, event["message_id"])
    duplicates = await wait_for(
        lambda: (
            (
                rows := timeline.query(
                    "SELECT * FROM event WHERE kind='inbound_duplicate' AND stream_id=?",
                    row["stream_id"],
                )
            )
            and len(rows) == 2
            and rows
        ),
        what="two duplicate records",
    )
    assert all(d["message_id"] == row["id"] for d in duplicates)
    assert len(timeline.messages(event["message_id"])) == 1
    inbound = timeline.query(
        "SELECT count(*) FROM event WHERE kind='inbound' AND message_id=?", row["id"]
    )
    assert inbound[0][0] == 1


async def test_bots_own_message_is_recorded_as_the_bots(
    napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    sent = napcat.group_message(7301, napcat.self_id, "我是机器人", post_type="message_sent")
    echoed = napcat.group_message(7301, napcat.self_id, "手机上发的")
    await napcat.send_event(sent)
    await napcat.send_event(echoed)
    for event in (sent, echoed):
        row = await _stored(timeline, event["message_id"])
        assert row["from_bot"] == 1
        assert row["sender_user_id"] == str(napcat.self_id)
        inbound = timeline.query(
            "SELECT count(*) FROM event WHERE kind='inbound' AND message_id=?", row["id"]
        )
        assert inbound[0][0] == 0, "the bot's own message must never count as inbound"


async def test_recall_marks_the_message_and_keeps_it(
    napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    event = napcat.group_message(7401, 818181, "说错了")
    await napcat.send_event(event)
    row = await _stored(timeline, event["message_id"])
    await napcat.send_event(napcat.group_recall(7401, 818181, event["message_id"]))
    await wait_for(lambda: timeline.messages(event["message_id"])[0]["recalled"], what="recall")
    kept = timeline.messages(event["message_id"])[0]
    assert kept["text"] == "说错了"
    recalls = timeline.query(
        "SELECT * FROM event WHERE kind='message_recalled' AND message_id=?", row["id"]
    )
    assert len(recalls) == 1


async def test_poke_and_member_changes_are_recorded(
    napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    await napcat.send_event(napcat.poke(7501, 919191, napcat.self_id))
    await napcat.send_event(napcat.member_change(7501, 929292, joined=True))
    await napcat.send_event(napcat.member_change(7501, 939393, joined=False))
    poke = await wait_for(
        lambda: timeline.query(
            "SELECT m.* FROM message m JOIN stream s ON s.id=m.stream_id "
            "WHERE s.external_id='7501' AND m.is_poke=1"
        ),
        what="poke row",
    )
    assert json.loads(poke[0]["mentions"]) == [str(napcat.self_id)]
    assert "牛牛" not in poke[0]["text"]
    joined = await wait_for(lambda: timeline.events("member_joined"), what="join")
    left = await wait_for(lambda: timeline.events("member_left"), what="leave")
    assert any(json.loads(e["payload"])["user_id"] == "929292" for e in joined)
    assert any(json.loads(e["payload"])["user_id"] == "939393" for e in left)


async def test_cq_code_lookalike_text_stays_text(napcat: FakeNapCat, timeline: TimelineDb) -> None:
    event = napcat.group_message(7601, 121212, "[CQ:at,qq=all] [CQ:image,file=x]")
    await napcat.send_event(event)
    row = await _stored(timeline, event["message_id"])
    assert row["text"] == "[CQ:at,qq=all] [CQ:image,file=x]"
    assert [s["kind"] for s in json.loads(row["segments"])] == ["text"]
    assert not row["mentions_all"]


async def test_only_reverse_websocket_is_served(
    running_bot: BotProcess, timeline: TimelineDb, napcat: FakeNapCat
) -> None:
    forged = napcat.group_message(7801, 141414, "forged over HTTP")
    forged.update(time=1, self_id=555)
    async with httpx.AsyncClient() as client:
        for path in ("/onebot/v11/", "/onebot/v11/http", "/onebot/v11/http/"):
            response = await client.post(running_bot.http_url + path, json=forged)
            assert response.status_code in (404, 405), path
    assert timeline.messages(forged["message_id"]) == []
    assert "555" not in (await running_bot.health())["bots"]


async def test_health_lists_the_connected_bot(running_bot: BotProcess, napcat: FakeNapCat) -> None:
    health = await running_bot.health()
    assert health["ok"] is True
    assert str(napcat.self_id) in health["bots"]
    assert health["database"] == "sqlite"
    assert health["model_chat"] is False


async def test_message_ids_are_unique_per_stream_not_global(
    napcat: FakeNapCat, timeline: TimelineDb
) -> None:
    shared_id = next_message_id()
    await napcat.send_event(napcat.group_message(7701, 131313, "一", message_id=shared_id))
    await napcat.send_event(napcat.group_message(7702, 131313, "二", message_id=shared_id))
    rows = await wait_for(
        lambda: len(timeline.messages(shared_id)) == 2 and timeline.messages(shared_id),
        what="both rows",
    )
    assert {r["text"] for r in rows} == {"一", "二"}
