"""End to end: a feature plugged in only through the seam (tests/support/example_feature:
a stage, a command, a job, a settings section and its own table), and a built-in feature
switched off by configuration, each in the real bot over a real WebSocket and database."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.bot_process import BotProcess
from tests.support.console_api import put_settings
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, at, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID = 40_501
GROUP = 9_100
TOKEN = "seam-console-token"
EXAMPLE = ["tests.support.example_feature"]


@pytest.fixture(scope="module")
async def bot(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BotProcess]:
    env = {"PALLAS_FEATURE_MODULES": json.dumps(EXAMPLE), "PALLAS_CONSOLE_TOKEN": TOKEN}
    process = BotProcess(tmp_path_factory.mktemp("seam"), token=ACCESS_TOKEN, env=env)
    process.start()
    try:
        await process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest.fixture
async def napcat(bot: BotProcess) -> AsyncIterator[FakeNapCat]:
    client = FakeNapCat(bot.ws_url, SELF_ID, ACCESS_TOKEN)
    client.answer_sends()
    await client.connect()
    try:
        yield client
    finally:
        await client.close()


async def say(napcat: FakeNapCat, timeline: TimelineDb, user: int, words: str) -> None:
    event = napcat.group_message(GROUP, user, [text(words)])
    await napcat.send_event(event)
    await wait_for(lambda: timeline.messages(event["message_id"]), what="stored message")


def counted(timeline: TimelineDb, word: str) -> int:
    return int(timeline.scalar("SELECT COUNT(*) FROM example_mention WHERE word = ?", word))


def answers(napcat: FakeNapCat) -> list[str]:
    return [_text(call["message"]) for call in napcat.calls_to("send_group_msg")]


def _text(message: Any) -> str:
    return "".join(seg["data"].get("text", "") for seg in message if seg["type"] == "text")


async def test_a_feature_plugged_through_the_seam_runs_end_to_end(
    bot: BotProcess, napcat: FakeNapCat
) -> None:
    timeline = TimelineDb(bot.db_path)
    assert "example feature started" in bot.log()  # its lifespan ran with the core's
    await say(napcat, timeline, 1, "今天先来个小测试")
    await wait_for(lambda: counted(timeline, "小测试") == 1, what="the job's row")
    await say(napcat, timeline, 2, "/数一数")
    await wait_for(lambda: "「小测试」说了 1 次" in answers(napcat), what="the command's answer")
    # its settings section, changed from the console, is read where the stage acts
    section = await put_settings(bot, TOKEN, "example", {"word": "芒果"})
    assert {f["name"]: f["value"] for f in section["fields"]}["word"] == "芒果"
    await say(napcat, timeline, 1, "芒果好吃")
    await wait_for(lambda: counted(timeline, "芒果") == 1, what="a row for the new word")
    await say(napcat, timeline, 3, "/数一数")
    await wait_for(lambda: "「芒果」说了 1 次" in answers(napcat), what="the new word's count")
    stages = timeline.scalar(
        "SELECT COUNT(*) FROM event WHERE kind = 'gate_passed' OR kind = 'gate_dropped'"
    )
    assert stages >= 2  # the gate still saw every line after the feature's stage
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=bot.http_url, headers=bearer) as http:
        sections = {s["key"] for s in (await http.get("/pallas/api/settings")).json()}
        tools = {t["name"] for t in (await http.get("/pallas/api/tools")).json()}
    assert {"example", "memory", "media", "rage", "promises"} <= sections  # built-ins on
    assert {"memory", "sticker"} <= tools


async def test_its_table_and_branch_survive_a_restart(bot: BotProcess) -> None:
    bot.stop()
    assert "example feature stopped" in bot.log()
    bot.start()
    await bot.wait_ready()  # the branch is at its head: no migration runs, nothing fails
    timeline = TimelineDb(bot.db_path)
    assert counted(timeline, "小测试") == 1
    heads = {row[0] for row in timeline.query("SELECT version_num FROM alembic_version")}
    assert "example_0001" in heads and any(head.isdigit() for head in heads)


async def test_built_in_features_switched_off_leave_the_bot_recording_and_answering(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    off = ["responders", "memory", "media", "persona"]
    env = {"PALLAS_FEATURES_OFF": json.dumps(off), "PALLAS_CONSOLE_TOKEN": TOKEN}
    process = BotProcess(tmp_path_factory.mktemp("off"), token=ACCESS_TOKEN, env=env)
    process.start()
    napcat = FakeNapCat(process.ws_url, SELF_ID + 1, ACCESS_TOKEN)
    napcat.answer_sends()
    try:
        await process.wait_ready()
        await napcat.connect()
        timeline = TimelineDb(process.db_path)
        for user in (1, 2):  # the same line from two members: the repeater would echo it
            await say(napcat, timeline, user, "冲冲冲")
        await say(napcat, timeline, 3, "/帮助")
        await wait_for(lambda: any("帮助" in t or "/" in t for t in answers(napcat)), what="help")
        assert "冲冲冲" not in answers(napcat)  # no repeater
        assert timeline.scalar("SELECT COUNT(*) FROM message WHERE text = '冲冲冲'") == 2
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=process.http_url, headers=bearer) as http:
            sections = {s["key"] for s in (await http.get("/pallas/api/settings")).json()}
            tools = {t["name"] for t in (await http.get("/pallas/api/tools")).json()}
        assert not {"memory", "media", "rage", "promises"} & sections  # none of theirs
        assert {"gate", "agent", "retention"} <= sections  # the core's are there
        assert not {"memory", "sticker"} & tools
    finally:
        await napcat.close()
        process.stop()


# Each built-in feature switched off alone, by configuration: the bot starts, records every
# line, answers a command and answers an @ through the model; only that feature's settings
# sections are gone.
FEATURE_SECTIONS = {
    "responders": set(),
    "memory": {"memory"},
    "media": {"media"},
    "persona": {"rage", "follow_up", "promises"},
    "classic": {"classic"},
    "summaries": {"summaries"},
    "slang": {"slang"},
}
CORE_SECTIONS = {
    "gate", "agent", "delivery", "features", "notices", "character", "retention", "models",
    "outgoing", "budget", "group_budget",
}
MODEL = "seam-chat"


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


@pytest.mark.parametrize("feature", sorted(FEATURE_SECTIONS))
async def test_each_built_in_feature_switched_off_alone_leaves_the_bot_working(
    tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer, feature: str
) -> None:
    env = {
        "PALLAS_FEATURES_OFF": json.dumps([feature]),
        "PALLAS_CONSOLE_TOKEN": TOKEN,
        "LLM_BASE_URL": model.base_url,
        "LLM_MODEL": MODEL,
        "LLM_API_KEY": "sk-seam",
    }
    process = BotProcess(tmp_path_factory.mktemp(f"off-{feature}"), token=ACCESS_TOKEN, env=env)
    process.start()
    self_id = SELF_ID + 10 + sorted(FEATURE_SECTIONS).index(feature)
    napcat = FakeNapCat(process.ws_url, self_id, ACCESS_TOKEN)
    napcat.answer_sends()
    try:
        await process.wait_ready()
        await napcat.connect()
        timeline = TimelineDb(process.db_path)
        await say(napcat, timeline, 1, "大家晚上好")
        await say(napcat, timeline, 2, "/帮助")
        await wait_for(lambda: any("/" in t for t in answers(napcat)), what="help")
        said = json.dumps({"text": f"{feature} 关了我也在"}, ensure_ascii=False)
        model.script(MODEL, Reply("", (ToolCallSpec("reply", said),)))
        event = napcat.group_message(GROUP, 3, [at(self_id), text(" 在吗")])
        await napcat.send_event(event)
        await wait_for(lambda: f"{feature} 关了我也在" in answers(napcat), what="model reply")
        # the character is the core's: edited from the console, the next turn is it
        await put_settings(process, TOKEN, "character", {"name": "小帕"}, str(self_id))
        model.script(MODEL, Reply("", (ToolCallSpec("reply", said),)))
        asked = len(model.requests_for(MODEL))
        await napcat.send_event(napcat.group_message(GROUP, 3, [at(self_id), text(" 你是谁")]))
        await wait_for(lambda: len(model.requests_for(MODEL)) > asked, what="the next turn")
        system = model.requests_for(MODEL)[asked].body["messages"][0]["content"]
        assert "你是「小帕」" in system
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=process.http_url, headers=bearer) as http:
            sections = {s["key"] for s in (await http.get("/pallas/api/settings")).json()}
        others = set().union(*(v for k, v in FEATURE_SECTIONS.items() if k != feature))
        assert sections == CORE_SECTIONS | others
    finally:
        await napcat.close()
        process.stop()
