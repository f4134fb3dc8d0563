"""End to end: repeat, poke back and notices in the real bot, over a real WebSocket and database.

They are the built-in `responders` feature (on unless PALLAS_FEATURES_OFF names it).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.bot_process import BotProcess
from tests.support.fake_napcat import FakeNapCat, image, next_message_id, reply, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import TimelineDb, wait_for

_self_ids = itertools.count(40_001)
BLOCKED = 666  # in PALLAS_BLOCKED_USERS: recorded, never answered
OWNER = 777  # in SUPERUSERS: may use the owner's commands
NOTICES = {"8801": {"welcome": "欢迎 {at}（{name}）", "farewell": True}}


class NapCat(FakeNapCat):
    """Answers sends with message ids, lookups with a nickname, and fails what it is told to."""

    def __init__(self, ws_url: str, self_id: int) -> None:
        super().__init__(ws_url, self_id, ACCESS_TOKEN)
        self.failing: set[str] = set()
        self.sent_ids: list[int] = []
        self.responders["send_group_msg"] = self._sent
        self.responders["send_private_msg"] = self._sent
        self.responders["get_stranger_info"] = lambda p: {"nickname": f"u{p['user_id']}"}

    def _sent(self, _params: dict[str, Any]) -> dict[str, int]:
        self.sent_ids.append(next_message_id())
        return {"message_id": self.sent_ids[-1]}

    async def _answer(self, call: dict[str, Any]) -> None:
        if call.get("action") not in self.failing:
            await super()._answer(call)
            return
        call["failed"] = True  # already in api_calls; marked so calls() skips it
        await self.send_raw(
            json.dumps(
                {"status": "failed", "retcode": 1200, "data": None, "echo": call.get("echo")}
            )
        )

    def calls(self, action: str) -> list[dict[str, Any]]:
        return [c["params"] for c in self.api_calls if c["action"] == action and "failed" not in c]


@pytest.fixture(scope="module")
async def bot(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BotProcess]:
    process = BotProcess(
        tmp_path_factory.mktemp("deterministic"),
        token=ACCESS_TOKEN,
        env={"PALLAS_BLOCKED_USERS": json.dumps([str(BLOCKED)]), "SUPERUSERS": f'["{OWNER}"]'},
    )
    process.data_dir.mkdir(parents=True)
    (process.data_dir / "notices.json").write_text(json.dumps(NOTICES), encoding="utf-8")
    process.start()
    try:
        await process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest.fixture
async def napcat(bot: BotProcess) -> AsyncIterator[NapCat]:
    client = NapCat(bot.ws_url, next(_self_ids))
    await client.connect()
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def timeline(bot: BotProcess) -> TimelineDb:
    return TimelineDb(bot.db_path)


async def say(
    napcat: NapCat, timeline: TimelineDb, group_id: int, user_id: int, message: Any, **kw: Any
) -> None:
    """Send a group message and wait until the bot stored it, as a person would pace it."""
    event = napcat.group_message(group_id, user_id, message, **kw)
    await napcat.send_event(event)
    await wait_for(lambda: timeline.messages(event["message_id"]), what="stored message")


async def poke(napcat: NapCat, group_id: int | None, user_id: int, at: int) -> None:
    # Pokes carry no message id: the time (whole seconds) tells two pokes apart.
    await napcat.send_event({**napcat.poke(group_id, user_id, napcat.self_id), "time": at})


async def sends(napcat: NapCat, count: int, action: str = "send_group_msg") -> list[dict]:
    return await wait_for(
        lambda: len(napcat.calls(action)) >= count and napcat.calls(action),
        what=f"{count} {action}",
    )


async def test_two_people_same_text_is_repeated_exactly_once(
    napcat: NapCat, timeline: TimelineDb
) -> None:
    for user in (101, 102):
        await say(napcat, timeline, 8101, user, "今天的复读")
    [first] = await sends(napcat, 1)
    assert first == {"group_id": 8101, "message": [text("今天的复读")]}
    [echo] = await wait_for(lambda: timeline.messages(napcat.sent_ids[0]), what="bot's record")
    assert echo["from_bot"] == 1 and echo["text"] == "今天的复读"
    assert echo["sender_user_id"] == str(napcat.self_id)
    await say(napcat, timeline, 8101, 103, "今天的复读")  # a third person: no second repeat
    for user in (104, 105):  # a new run afterwards shows the third message was handled
        await say(napcat, timeline, 8101, user, "下一轮")
    calls = await sends(napcat, 2)
    assert [c["message"] for c in calls] == [[text("今天的复读")], [text("下一轮")]]


async def test_the_same_sticker_is_repeated_and_different_ones_are_not(
    napcat: NapCat, timeline: TimelineDb
) -> None:
    first, second = image("a.gif", "https://e.invalid/a.gif"), image("b.gif", "https://e.invalid/b")
    await say(napcat, timeline, 8102, 111, [first])
    await say(napcat, timeline, 8102, 112, [second])
    await say(napcat, timeline, 8102, 113, [second])
    [call] = await sends(napcat, 1)
    assert call["message"][0]["type"] == "image"
    assert call["message"][0]["data"]["file"] == "https://e.invalid/b"
    assert len(call["message"]) == 1


async def test_no_repeat_when_the_bot_is_part_of_the_run(
    napcat: NapCat, timeline: TimelineDb
) -> None:
    await say(napcat, timeline, 8103, napcat.self_id, "我先说的", post_type="message_sent")
    for user in (121, 122):
        await say(napcat, timeline, 8103, user, "我先说的")
    for user in (121, 122):
        await say(napcat, timeline, 8103, user, "换个话题")
    calls = await sends(napcat, 1)
    assert [c["message"] for c in calls] == [[text("换个话题")]]


async def test_poke_back_once_per_person_and_three_per_group(
    bot: BotProcess, napcat: NapCat, timeline: TimelineDb
) -> None:
    now = int(time.time())
    await poke(napcat, 8201, 201, now)
    [first] = await sends(napcat, 1, "group_poke")
    assert first == {"group_id": 8201, "user_id": 201}
    await poke(napcat, 8201, 201, now + 1)  # the same person again, within a minute
    await wait_for(lambda: "poke from 201 not returned: person_cooldown" in bot.log(), what="cd")
    for user in (202, 203, 204):  # a burst: only two more fit in the five-minute budget
        await poke(napcat, 8201, user, now + 2)
    limited = [f"poke from {user} not returned: stream_limit" for user in (202, 203, 204)]
    await wait_for(lambda: sum(line in bot.log() for line in limited) == 1, what="limit")
    calls = await sends(napcat, 3, "group_poke")
    assert len(calls) == 3 and len({c["user_id"] for c in calls}) == 3
    pokes = (
        "SELECT m.mentions FROM message m JOIN stream s ON s.id = m.stream_id "
        "WHERE s.self_id = ? AND m.from_bot = 1 AND m.is_poke = 1"
    )
    rows = await wait_for(
        lambda: len(r := timeline.query(pokes, str(napcat.self_id))) >= 3 and r,
        what="the three pokes recorded once confirmed",
    )
    recorded = sorted(int(json.loads(r["mentions"])[0]) for r in rows)
    assert recorded == sorted(c["user_id"] for c in calls)


async def test_private_poke_is_returned_with_friend_poke(napcat: NapCat) -> None:
    await poke(napcat, None, 211, int(time.time()))
    assert await sends(napcat, 1, "friend_poke") == [{"user_id": 211}]
    assert napcat.calls("group_poke") == []


async def test_failed_actions_are_retried_by_the_outbox_and_recorded_once_confirmed(
    bot: BotProcess, napcat: NapCat, timeline: TimelineDb
) -> None:
    napcat.failing |= {"group_poke", "send_group_msg"}
    now = int(time.time())
    await poke(napcat, 8301, 301, now)
    for user in (302, 303):
        await say(napcat, timeline, 8301, user, "发不出去")
    await wait_for(lambda: "group_poke of 301 in group:8301 failed" in bot.log(), what="warning")
    own = "SELECT count(*) FROM message m JOIN stream s ON s.id = m.stream_id "
    own += "WHERE s.self_id = ? AND m.from_bot = 1"
    assert timeline.scalar(own, str(napcat.self_id)) == 0  # nothing confirmed, nothing recorded
    # A poke back queued but not yet confirmed counts for the limits like a sent one.
    await poke(napcat, 8301, 301, now + 1)
    napcat.failing.clear()
    assert await sends(napcat, 1, "group_poke") == [{"group_id": 8301, "user_id": 301}]
    assert [c["message"] for c in await sends(napcat, 1)] == [[text("发不出去")]]
    await wait_for(lambda: timeline.scalar(own, str(napcat.self_id)) == 2, what="both recorded")
    # The run had its one answer: a third person does not start another.
    await say(napcat, timeline, 8301, 304, "发不出去")
    for user in (305, 306):
        await say(napcat, timeline, 8301, user, "好了")
    calls = await sends(napcat, 2)
    assert [c["message"] for c in calls] == [[text("发不出去")], [text("好了")]]
    assert len(napcat.calls("group_poke")) == 1
    tries = [c for c in napcat.api_calls if c["action"] == "group_poke"]
    assert tries[0].get("failed") and not tries[-1].get("failed")


async def test_welcome_and_farewell_only_where_enabled(napcat: NapCat) -> None:
    await napcat.send_event(napcat.member_change(8802, 401, joined=True))  # not enabled there
    await napcat.send_event(napcat.member_change(8801, napcat.self_id, joined=True))  # the bot
    await napcat.send_event(napcat.member_change(8801, 402, joined=True))
    [welcome] = await sends(napcat, 1)
    assert welcome == {
        "group_id": 8801,
        "message": [text("欢迎 "), {"type": "at", "data": {"qq": "402"}}, text("（u402）")],
    }
    await napcat.send_event(napcat.member_change(8801, 403, joined=False))
    calls = await sends(napcat, 2)
    assert calls[1] == {"group_id": 8801, "message": [text("u403 离开了本群，有缘再见。")]}
    assert [c["group_id"] for c in napcat.calls("send_group_msg")] == [8801, 8801]


async def test_a_blocked_member_is_recorded_flagged_and_answered_by_nothing(
    bot: BotProcess, napcat: NapCat, timeline: TimelineDb
) -> None:
    now = int(time.time())
    await say(napcat, timeline, 8401, 131, "屏蔽复读")
    await say(napcat, timeline, 8401, BLOCKED, "屏蔽复读")  # would complete a run: not answered
    await say(napcat, timeline, 8401, BLOCKED, [text("牛牛 在吗")])
    await poke(napcat, 8401, BLOCKED, now)
    for user in (132, 133):  # the plugins are live: a run of others is repeated
        await say(napcat, timeline, 8401, user, "换个话题")
    [call] = await sends(napcat, 1)
    assert call["message"] == [text("换个话题")]
    assert napcat.calls("group_poke") == []
    flagged = "SELECT m.id, m.suppressed FROM message m JOIN stream s ON s.id = m.stream_id "
    flagged += "JOIN identity i ON i.person_id = m.sender_person_id "
    flagged += "WHERE s.self_id = ? AND i.user_id = ?"
    rows = await wait_for(
        lambda: (
            (r := timeline.query(flagged, str(napcat.self_id), str(BLOCKED))) and len(r) == 3 and r
        ),
        what="the blocked member's three lines",
    )
    assert all(row["suppressed"] == 1 for row in rows)
    events = {e["message_id"]: e for e in timeline.events("stage_suppressed")}
    for row in rows:
        assert events[row["id"]]["reason"] == "blocked_user"
        trail = timeline.query("SELECT kind FROM event WHERE message_id = ?", row["id"])
        assert [e["kind"] for e in trail] == ["inbound", "stage_suppressed"]  # no gate event


async def test_the_owner_asks_why_a_line_was_not_answered_and_gets_the_gate_rule(
    napcat: NapCat, timeline: TimelineDb
) -> None:
    chatter = napcat.group_message(8501, 141, "今天天气不错")
    await napcat.send_event(chatter)
    [row] = await wait_for(lambda: timeline.messages(chatter["message_id"]), what="the line")
    await wait_for(
        lambda: [e for e in timeline.events("gate_dropped") if e["message_id"] == row["id"]],
        what="the gate's decision on this line",
    )
    await say(napcat, timeline, 8501, 142, "/why")  # not an owner: told so, once
    await sends(napcat, 1)
    await say(napcat, timeline, 8501, OWNER, [reply(chatter["message_id"]), text("/why")])
    refusal, call = await sends(napcat, 2)
    assert [seg["data"]["text"] for seg in refusal["message"]] == ["/why 只有主人能用。"]
    [answer] = [seg["data"]["text"] for seg in call["message"]]
    assert answer.splitlines()[0].endswith("没理：这句话没有叫我，群里也没在跟我说话。")
    assert answer.splitlines()[1:] == ["- 门控没有接：这句话没有叫我，群里也没在跟我说话"]
    commands = [e for e in timeline.events("stage_handled") if e["reason"] == "command_why"]
    assert len(commands) == 1  # the command went no further: no gate event for it
    trail = timeline.query("SELECT kind FROM event WHERE message_id = ?", commands[0]["message_id"])
    assert [row["kind"] for row in trail] == ["inbound", "stage_handled"]
