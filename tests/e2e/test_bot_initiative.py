"""End to end: the bot's own initiative and what the model may declare, through the real bot
process, fake NapCat and the fake model server.

- after a private reply the bot gets one chance to speak again, as a turn of its own; a new
  message from the person cancels it;
- an owner's timed promise comes due as a turn of the bot's own; a member's is not kept;
- the model's judgment that a message attacked it ([冒犯:…]) counts by rule: rage, then a
  silence; never for an owner.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.bot_process import BotProcess
from tests.support.console_api import put_settings
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, at, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.model_bot import bot_with_model
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID = 46_501
OWNER, TIRED, CHATTY, PUPIL, RUDE = 9002, 9102, 9202, 9302, 9402
GROUP = 8201
CHAT = "e2e-initiative"
TOKEN = "initiative-console-token"
# The follow-up chance comes 6 to 7 seconds after a reply, at any hour of the bot's day.
AGENT_FILE = """\
memory:
  enabled: false
rage:
  threshold: 3.5  # two judged attacks (2 each, decaying a little) silence
follow_up:
  min_minutes: 0.1
  max_minutes: 0.12
  at_night: true
"""


def reply(words: str) -> Reply:
    return Reply("", (ToolCallSpec("reply", json.dumps({"text": words}, ensure_ascii=False)),))


def silent(reason: str) -> Reply:
    return Reply("", (ToolCallSpec("silent", json.dumps({"reason": reason}, ensure_ascii=False)),))


class NapCat(FakeNapCat):
    def __init__(self, ws_url: str) -> None:
        super().__init__(ws_url, SELF_ID, ACCESS_TOKEN)
        self.answer_sends()

    def sent_to(self, user: int) -> list[str]:
        """The words of each private message sent to `user`, in order."""
        return [
            "".join(seg["data"].get("text", "") for seg in call["message"])
            for call in self.calls_to("send_private_msg")
            if call["user_id"] == user
        ]


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(default=reply("嗯")) as server:
        yield server


@pytest.fixture(scope="module")
async def bot(
    tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer
) -> AsyncIterator[BotProcess]:
    env = {"SUPERUSERS": f'["{OWNER}"]', "PALLAS_CONSOLE_TOKEN": TOKEN}
    workdir = tmp_path_factory.mktemp("initiative")
    async with bot_with_model(workdir, model, CHAT, agent_file=AGENT_FILE, env=env) as process:
        yield process


@pytest.fixture(scope="module")
async def napcat(bot: BotProcess) -> AsyncIterator[NapCat]:
    client = NapCat(bot.ws_url)
    await client.connect()
    yield client
    await client.close()


@pytest.fixture(scope="module")
def timeline(bot: BotProcess) -> TimelineDb:
    return TimelineDb(bot.db_path)


async def private(napcat: NapCat, user: int, words: str) -> None:
    """Say `words` privately and wait for the bot's answer."""
    before = len(napcat.sent_to(user))
    await napcat.send_event(napcat.private_message(user, words))
    await wait_for(lambda: len(napcat.sent_to(user)) > before, timeout=20, what="the answer")


def asks(model: FakeModelServer) -> list[str]:
    """The last user message of every chat request, in order."""
    return [str(r.body["messages"][-1]["content"]) for r in model.requests_for(CHAT)]


def systems(model: FakeModelServer) -> list[str]:
    return [str(r.body["messages"][0]["content"]) for r in model.requests_for(CHAT)]


def events(timeline: TimelineDb, kind: str) -> list[Any]:
    return timeline.query("SELECT * FROM event WHERE kind = ? ORDER BY id", kind)


def follow_ups(timeline: TimelineDb) -> list[Any]:
    return timeline.query(
        "SELECT status, payload FROM job WHERE kind = 'persona.follow_up' ORDER BY id"
    )


async def test_a_private_reply_gets_one_chance_to_speak_again(
    napcat: NapCat, model: FakeModelServer, timeline: TimelineDb
) -> None:
    model.script(CHAT, reply("辛苦了"), reply("到家了吗？记得吃点东西"))
    await private(napcat, TIRED, "今天加班到现在")
    first = len(model.requests_for(CHAT))

    words = await wait_for(
        lambda: napcat.sent_to(TIRED)[1:], timeout=30, what="the follow-up"
    )
    assert words == ["到家了吗？记得吃点东西"]
    ask = asks(model)[first]
    assert "这一轮没有新消息" in ask and "分钟没再说话" in ask
    started = [e for e in events(timeline, "turn_started") if e["reason"] == "proactive"]
    assert [json.loads(e["payload"])["occasion"] for e in started] == ["private_follow_up"]
    # One chance only: the follow-up's own turn arms nothing.
    await wait_for(
        lambda: all(job["status"] == "done" for job in follow_ups(timeline)),
        timeout=20,
        what="the follow-up job done",
    )
    await asyncio.sleep(8)  # past where a second chance would have come
    assert napcat.sent_to(TIRED) == ["辛苦了", "到家了吗？记得吃点东西"]
    assert len(follow_ups(timeline)) == 1


async def test_a_new_message_from_them_cancels_the_chance(
    napcat: NapCat, model: FakeModelServer, timeline: TimelineDb
) -> None:
    model.script(CHAT, reply("在的"), reply("好，那不打扰你"), silent("没什么要补充的"))
    await private(napcat, CHATTY, "在吗")
    await private(napcat, CHATTY, "算了没事")
    skipped = await wait_for(
        lambda: [e for e in events(timeline, "follow_up_skipped") if e["reason"] == "they_spoke"],
        timeout=30,
        what="the first chance cancelled",
    )
    assert len(skipped) == 1
    # The second reply's chance came too: the model was asked and chose silence.
    await wait_for(
        lambda: sum("这一轮没有新消息" in a for a in asks(model)) >= 2,
        timeout=30,
        what="the second chance",
    )
    await wait_for(lambda: _settled(timeline), timeout=20, what="turns over")
    assert napcat.sent_to(CHATTY) == ["在的", "好，那不打扰你"]


async def test_an_owners_timed_promise_comes_due_as_the_bots_own_turn(
    napcat: NapCat, model: FakeModelServer, timeline: TimelineDb
) -> None:
    model.script(CHAT, reply("好的[承诺:3秒后提醒主人喝水]"), reply("主人，该喝水啦"))
    await private(napcat, OWNER, "3秒后提醒我喝水")
    assert "[承诺:要做的事]" in systems(model)[-1]  # an owner is told how to make one
    assert napcat.sent_to(OWNER) == ["好的"]

    await wait_for(lambda: napcat.sent_to(OWNER)[1:], timeout=30, what="the promise kept")
    assert napcat.sent_to(OWNER)[1] == "主人，该喝水啦"
    due = [a for a in asks(model) if "你答应过主人到这个时候要做的事" in a]
    assert len(due) == 1 and "提醒主人喝水" in due[0]
    rows = timeline.query("SELECT text, state FROM promise")
    assert [(r["text"], r["state"]) for r in rows] == [("提醒主人喝水", "kept")]
    made = events(timeline, "promise_made")
    assert [e["reason"] for e in made] == ["timed"]


async def test_a_members_promise_is_not_kept(
    napcat: NapCat, model: FakeModelServer, timeline: TimelineDb
) -> None:
    model.script(CHAT, reply("行[承诺:明天提醒交作业]"))
    await private(napcat, PUPIL, "明天提醒我交作业")
    assert napcat.sent_to(PUPIL) == ["行"]  # the marker never reaches the chat
    assert "[承诺:" not in systems(model)[-1]  # nobody tells a member's turn how to promise
    refused = await wait_for(
        lambda: events(timeline, "promise_refused"), timeout=10, what="the refusal"
    )
    assert [e["reason"] for e in refused] == ["not_owner"]
    rows = timeline.query("SELECT text FROM promise")
    assert [r["text"] for r in rows] == ["提醒主人喝水"]  # only the owner's
    # Their reply's follow-up chance passes (the default answer) before the next test scripts.
    await wait_for(
        lambda: all(job["status"] == "done" for job in follow_ups(timeline)),
        timeout=30,
        what="the follow-ups over",
    )
    await wait_for(lambda: _settled(timeline), timeout=20, what="turns over")


async def say_in_group(napcat: NapCat, user: int, words: str) -> dict[str, Any]:
    event = napcat.group_message(GROUP, user, [at(SELF_ID), text(f" {words}")])
    await napcat.send_event(event)
    return event


def attacks(timeline: TimelineDb, user: int) -> list[Any]:
    return timeline.query(
        "SELECT e.reason, e.payload FROM event e JOIN identity i ON i.person_id = e.person_id "
        "WHERE e.kind = 'attack_noted' AND i.user_id = ? ORDER BY e.id",
        str(user),
    )


async def test_the_models_judgment_of_an_attack_counts_by_rule(
    napcat: NapCat, model: FakeModelServer, timeline: TimelineDb
) -> None:
    judged = reply("[冒犯:阴阳怪气]哦")
    model.script(CHAT, judged, judged, judged)
    sends = len(napcat.calls_to("send_group_msg"))
    await say_in_group(napcat, OWNER, "你今天话好多啊")  # an owner never attacks
    for n in (1, 2):
        await say_in_group(napcat, RUDE, "你今天话好多啊")
        await wait_for(lambda n=n: len(attacks(timeline, RUDE)) >= n, timeout=20, what="attack")
    assert [a["reason"] for a in attacks(timeline, RUDE)] == ["angrier", "silenced"]
    payload = json.loads(attacks(timeline, RUDE)[0]["payload"])
    assert payload["attack"] == "judged" and payload["evidence"].startswith("model: 阴阳怪气")
    assert "[冒犯:一句理由]" in systems(model)[-1]
    await wait_for(
        lambda: len(napcat.calls_to("send_group_msg")) >= sends + 3, timeout=20, what="replies"
    )
    assert attacks(timeline, OWNER) == []

    calls = len(model.requests_for(CHAT))
    ignored = await say_in_group(napcat, RUDE, "怎么不说话了")  # silenced now
    await wait_for(
        lambda: (rows := timeline.messages(ignored["message_id"])) and rows[0]["suppressed"],
        timeout=10,
        what="flagged",
    )
    await asyncio.sleep(0.5)  # a turn, had one started, would have called the model by now
    assert len(model.requests_for(CHAT)) == calls


def _settled(timeline: TimelineDb) -> bool:
    started = timeline.scalar("SELECT COUNT(*) FROM event WHERE kind = 'turn_started'")
    ended = timeline.scalar(
        "SELECT COUNT(*) FROM event WHERE kind IN "
        "('turn_finished', 'turn_failed', 'turn_waiting', 'turn_interrupted')"
    )
    return bool(started == ended)


async def test_the_follow_up_switched_off_in_the_console_arms_nothing_until_on_again(
    napcat: NapCat, model: FakeModelServer, timeline: TimelineDb, bot: BotProcess
) -> None:
    quiet = 9502
    await wait_for(lambda: _settled(timeline), what="earlier turns over")
    armed = len(follow_ups(timeline))
    await put_settings(bot, TOKEN, "follow_up", {"enabled": False})
    try:
        model.script(CHAT, reply("好的"))
        await private(napcat, quiet, "我先睡了")
        await wait_for(lambda: _settled(timeline), what="the turn over")
        await asyncio.sleep(0.5)  # the chance, had it been armed, is armed right after
        assert len(follow_ups(timeline)) == armed
    finally:
        await put_settings(bot, TOKEN, "follow_up", {"enabled": True})
    model.script(CHAT, reply("晚安"))
    await private(napcat, quiet, "真睡了")
    await wait_for(lambda: len(follow_ups(timeline)) > armed, what="the chance armed again")
