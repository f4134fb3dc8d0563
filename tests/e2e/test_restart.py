"""Restarts and crashes: what was committed stays, nothing doubles, start-up refuses bad config."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import websockets

from tests.support.bot_process import BotProcess
from tests.support.fake_llm import FakeModelServer, Reply, Stall, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, at, text
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID = 30_001
MODEL = "e2e-restart"


@pytest.fixture
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


async def test_killed_bot_keeps_messages_and_dedupes_after_restart(tmp_path: Path) -> None:
    bot = BotProcess(tmp_path)
    bot.start()
    await bot.wait_ready()
    napcat = await FakeNapCat(bot.ws_url, SELF_ID).connect()
    before = [napcat.group_message(9001, 200 + i, f"崩溃前 {i}") for i in range(20)]
    for event in before:
        await napcat.send_event(event)
    timeline = TimelineDb(bot.db_path)
    await wait_for(lambda: timeline.scalar("SELECT count(*) FROM message") == 20, what="20 rows")
    bot.kill()  # SIGKILL: no shutdown hook runs
    await napcat.close()

    bot.start()
    await bot.wait_ready()
    napcat = await FakeNapCat(bot.ws_url, SELF_ID).connect()
    after = napcat.group_message(9001, 300, "重启后")
    for event in (*before[:5], after):  # NapCat may deliver some events again
        await napcat.send_event(event)
    await wait_for(lambda: timeline.messages(after["message_id"]), what="post-restart message")
    await wait_for(lambda: len(timeline.events("inbound_duplicate")) == 5, what="5 duplicates")
    assert timeline.scalar("SELECT count(*) FROM message") == 21
    assert timeline.scalar("SELECT count(DISTINCT platform_message_id) FROM message") == 21
    assert timeline.scalar("SELECT count(*) FROM stream") == 1
    assert timeline.scalar("SELECT count(*) FROM event WHERE kind='inbound'") == 21
    await napcat.close()
    assert bot.stop() == 0


async def test_graceful_stop_commits_what_was_accepted(tmp_path: Path) -> None:
    bot = BotProcess(tmp_path)
    bot.start()
    await bot.wait_ready()
    napcat = await FakeNapCat(bot.ws_url, SELF_ID).connect()
    event = napcat.group_message(9002, 201, "关机前最后一句")
    await napcat.send_event(event)
    timeline = TimelineDb(bot.db_path)
    await wait_for(lambda: timeline.messages(event["message_id"]), what="message")
    await napcat.close()
    assert bot.stop() == 0
    assert "Application shutdown complete" in bot.log()


async def test_wrong_access_token_is_refused(tmp_path: Path) -> None:
    bot = BotProcess(tmp_path, token="right-token")
    bot.start()
    try:
        await bot.wait_ready()
        with pytest.raises(websockets.InvalidStatus) as refused:
            await FakeNapCat(bot.ws_url, SELF_ID, "wrong-token").connect()
        assert refused.value.response.status_code == 403
        with pytest.raises(websockets.InvalidStatus):
            await FakeNapCat(bot.ws_url, SELF_ID, None).connect()
        ok = await FakeNapCat(bot.ws_url, SELF_ID, "right-token").connect()
        assert str(SELF_ID) in (await bot.health())["bots"]
        await ok.close()
    finally:
        bot.stop()


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"PORT": "eighty"}, "PORT"),
        ({"HOST": "0.0.0.0", "ONEBOT_ACCESS_TOKEN": ""}, "ONEBOT_ACCESS_TOKEN"),
        ({"SUPERUSERS": "12345"}, "SUPERUSERS"),
        ({"PALLAS_DATABASE_URL": "mysql://x"}, "PALLAS_DATABASE_URL"),
        ({"LLM_BASE_URL": "https://api.example.invalid/v1"}, "LLM_MODEL"),
    ],
)
def test_bad_configuration_stops_start_up_naming_the_key(
    tmp_path: Path, env: dict[str, str], named: str
) -> None:
    bot = BotProcess(tmp_path, env=env)
    assert bot.run_to_exit() == 2
    output = bot.log()
    assert f"{named}:" in output
    assert "Traceback" not in output
    assert not bot.db_path.exists()


async def test_env_file_in_working_dir_is_read(tmp_path: Path) -> None:
    bot = BotProcess(tmp_path)
    (tmp_path / ".env").write_text(
        'NICKNAME=["小帕"]\nLLM_BASE_URL=http://127.0.0.1:9/v1\nLLM_MODEL=test-model\n',
        encoding="utf-8",
    )
    bot.start()
    try:
        health = await bot.wait_ready()
        assert health["model_chat"] is True
        assert "model chat is on" in bot.log()
    finally:
        bot.stop()


def _turn_calls(model: FakeModelServer) -> int:
    """Chat completions the conversation agent made (they offer the `reply` tool)."""
    return sum(
        any(tool.get("function", {}).get("name") == "reply" for tool in r.body.get("tools", []))
        for r in model.requests
    )


def _reply(words: str) -> Reply:
    return Reply("", (ToolCallSpec("reply", json.dumps({"text": words}, ensure_ascii=False)),))


async def test_a_retried_at_cut_off_again_ends_given_up_and_nothing_else(
    tmp_path: Path, model: FakeModelServer
) -> None:
    """Killed while the @'s turn waits for the model, then killed again while its retry
    waits: the third start gives the @ up (it ran again once) and answers what comes next."""
    model.script(MODEL, Stall(), Stall(), _reply("后来的回答"))
    env = {"LLM_BASE_URL": model.base_url, "LLM_MODEL": MODEL, "LLM_API_KEY": "sk-e2e"}
    bot = BotProcess(tmp_path, env=env)
    timeline = TimelineDb(bot.db_path)
    napcat: FakeNapCat | None = None
    try:
        for start, calls in enumerate((1, 2), start=1):
            bot.start()
            await bot.wait_ready()
            napcat = await FakeNapCat(bot.ws_url, SELF_ID).connect()
            if start == 1:
                asked = napcat.group_message(9003, 401, [at(SELF_ID), text(" 在吗")])
                await napcat.send_event(asked)
            await wait_for(lambda n=calls: _turn_calls(model) == n, what=f"model call {calls}")
            bot.kill()  # the turn (then its retry) is in flight
            await napcat.close()
        bot.start()
        await bot.wait_ready()
        napcat = await FakeNapCat(bot.ws_url, SELF_ID).connect()
        napcat.answer_sends()
        later = napcat.group_message(9003, 402, [at(SELF_ID), text(" 我也问")])
        await napcat.send_event(later)  # answered: start-up recovery is long over by then
        await wait_for(lambda: napcat.calls_to("send_group_msg"), what="the later answer")
        [row] = timeline.messages(asked["message_id"])
        ends = timeline.query(
            "SELECT turn_id, reason FROM event WHERE kind = 'turn_interrupted' ORDER BY id"
        )
        assert [e["reason"] for e in ends] == ["retry", "given_up"]
        started = timeline.query("SELECT turn_id, payload FROM event WHERE kind = 'turn_started'")
        took = [
            e["turn_id"] for e in started if row["id"] in json.loads(e["payload"])["message_ids"]
        ]
        assert took == [e["turn_id"] for e in ends]  # run again once, then given up
        sent = [c["message"] for c in napcat.calls_to("send_group_msg")]
        assert len(sent) == 1 and "后来的回答" in json.dumps(sent, ensure_ascii=False)
        await napcat.close()
        assert bot.stop() == 0
    finally:
        if napcat is not None:
            await napcat.close()
        bot.stop()
