"""End to end: reminders set from the chat are said once when due, with no model, across a
kill -9 and a restart (docs/tasks.md)."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from pallas.core.local_time import SHANGHAI
from tests.support.bot_process import BotProcess
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, next_message_id
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID, MEMBER, GROUP = 61001, 6200, 6300
CONSOLE = "tasks-console-token"
MODEL = "tasks-chat"


class NapCat(FakeNapCat):
    def __init__(
        self, ws_url: str, history: list[dict[str, Any]] | None = None, shift_s: float = 0.0
    ) -> None:
        super().__init__(ws_url, SELF_ID, ACCESS_TOKEN)
        self.responders["send_group_msg"] = lambda _params: {"message_id": next_message_id()}
        # What QQ keeps of the bot's private messages (shared by a reconnecting NapCat): a
        # send whose receipt died with the bot is found there, not sent again. Its times are
        # the bot's (moved) clock's, as QQ's and a real bot's agree.
        self.history = history if history is not None else []
        self.shift_s = shift_s
        self.responders["send_private_msg"] = self._sent_privately
        self.responders["get_friend_msg_history"] = lambda params: {"messages": [
            m for m in self.history if str(m["target"]) == str(params["user_id"])]}  # fmt: skip

    def _sent_privately(self, params: dict[str, Any]) -> dict[str, Any]:
        message_id = next_message_id()
        self.history.append({
            "self_id": SELF_ID, "user_id": SELF_ID, "target": params["user_id"],
            "time": int(time.time() + self.shift_s), "message_id": message_id,
            "message_type": "private", "sender": {"user_id": SELF_ID, "nickname": "bot"},
            "message": params["message"], "post_type": "message_sent",
        })  # fmt: skip
        return {"message_id": message_id}

    def said(self, action: str) -> list[list[dict[str, Any]]]:
        return [p["message"] for p in self.calls_to(action)]

    def texts(self, action: str) -> list[str]:
        return [json.dumps(m, ensure_ascii=False) for m in self.said(action)]


async def command(napcat: NapCat, words: str, *, group: bool = False, who: int = MEMBER) -> str:
    """Send a command and wait for its answer."""
    action = "send_group_msg" if group else "send_private_msg"
    before = len(napcat.said(action))
    event = (napcat.group_message(GROUP, who, words) if group
             else napcat.private_message(who, words))  # fmt: skip
    await napcat.send_event(event)
    await wait_for(lambda: len(napcat.said(action)) > before, what=f"the answer to {words}")
    return napcat.texts(action)[before]


async def test_a_reminder_survives_kill_9_and_is_said_once(tmp_path: Path) -> None:
    bot = BotProcess(tmp_path, token=ACCESS_TOKEN)
    bot.start()
    await bot.wait_ready()
    napcat = await NapCat(bot.ws_url).connect()
    answer = await command(napcat, "/提醒 8秒后 喝水")
    assert "提醒你" in answer and "#1" in answer
    bot.kill()  # SIGKILL before it is due
    await napcat.close()

    bot.start()
    await bot.wait_ready()
    napcat = await NapCat(bot.ws_url).connect()
    def reminded() -> list[str]:
        return [t for t in napcat.texts("send_private_msg") if "提醒：喝水" in t]

    said = await wait_for(reminded, timeout=30, what="the reminder")
    await asyncio.sleep(2)
    assert len(reminded()) == len(said) == 1
    db = TimelineDb(bot.db_path)
    assert db.scalar("SELECT count(*) FROM llm_call") == 0  # no model at that moment
    assert db.scalar("SELECT status FROM reminder WHERE id = 1") == "done"
    assert "没有待提醒的事" in await command(napcat, "/提醒列表")
    await napcat.close()
    assert bot.stop() == 0


async def test_a_group_reminder_ats_its_asker_and_can_be_cancelled(tmp_path: Path) -> None:
    bot = BotProcess(tmp_path, token=ACCESS_TOKEN, env={"PALLAS_CONSOLE_TOKEN": CONSOLE})
    bot.start()
    await bot.wait_ready()
    napcat = await NapCat(bot.ws_url).connect()
    assert "提醒你" in await command(napcat, "/提醒 3秒后 开会", group=True)
    assert "提醒你" in await command(napcat, "/提醒 每天8点 吃药", group=True)
    listed = await command(napcat, "/提醒列表", group=True)
    assert "开会" in listed and "吃药" in listed and "每天 8:00" in listed
    said = await wait_for(lambda: [m for m in napcat.said("send_group_msg")
                                   if any("提醒：开会" in s["data"].get("text", "") for s in m)],
                          what="the group reminder")  # fmt: skip
    assert said[0][0] == {"type": "at", "data": {"qq": str(MEMBER)}}
    assert "取消了" in await command(napcat, "/取消提醒 2", group=True)
    assert "没有你能取消" in await command(napcat, "/取消提醒 2", group=True)
    # Another member (a member's repeated commands are held back as a flood).
    assert "没看懂" in await command(napcat, "/提醒 每秒 喝水", group=True, who=MEMBER + 1)
    past = "/提醒 1970-01-01T00:00:00+08:00 穿越"
    assert "过去" in await command(napcat, past, group=True, who=MEMBER + 2)
    # The owner's console lists the open one and cancels it.
    assert "提醒你" in await command(napcat, "/提醒 每周一9点 交周报", group=True, who=MEMBER + 3)
    headers = {"Authorization": f"Bearer {CONSOLE}"}
    async with httpx.AsyncClient(base_url=bot.http_url, headers=headers) as http:
        listed = (await http.get("/pallas/api/tasks")).json()
        assert [(r["id"], r["text"], r["repeat"]) for r in listed["reminders"]] == [
            (3, "交周报", "每周一 9:00")]  # fmt: skip
        assert listed["reminders"][0]["user_id"] == str(MEMBER + 3)
        assert (await http.delete("/pallas/api/tasks/reminders/3")).status_code == 200
        assert (await http.delete("/pallas/api/tasks/reminders/3")).status_code == 404
        assert (await http.delete("/pallas/api/tasks/research/99")).status_code == 404
        assert (await http.get("/pallas/api/tasks")).json()["reminders"] == []
        assert (await http.get("/pallas/pages/tasks")).status_code == 200
    await napcat.close()
    assert bot.stop() == 0


async def test_the_model_sets_a_reminder_that_survives_kill_9_and_fires_with_no_model(
    tmp_path: Path,
) -> None:
    async with FakeModelServer() as model:
        remind = json.dumps({"when": "8秒后", "text": "喝水"}, ensure_ascii=False)
        ok = json.dumps({"text": "好，到时候叫你"}, ensure_ascii=False)
        model.script(MODEL, Reply("", (ToolCallSpec("task__remind", remind),)),
                     Reply("", (ToolCallSpec("reply", ok),)))  # fmt: skip
        env = {"LLM_BASE_URL": model.base_url, "LLM_MODEL": MODEL, "LLM_API_KEY": "sk-tasks"}
        bot = BotProcess(tmp_path, token=ACCESS_TOKEN, env=env)
        bot.start()
        await bot.wait_ready()
        napcat = await NapCat(bot.ws_url).connect()
        await napcat.send_event(napcat.private_message(MEMBER, "8秒后提醒我喝水"))
        await wait_for(lambda: any("到时候叫你" in t for t in napcat.texts("send_private_msg")),
                       what="the model's answer")  # fmt: skip
        # The tool was offered because the words asked for a reminder, and it was called.
        first = model.requests_for(MODEL)[0].body
        assert "task__remind" in {t["function"]["name"] for t in first.get("tools", [])}
        db = TimelineDb(bot.db_path)
        assert db.scalar("SELECT text FROM reminder") == "喝水"
        bot.kill()  # SIGKILL before it is due
        await napcat.close()

        asked = len(model.requests_for(MODEL))
        bot.start()
        await bot.wait_ready()
        napcat = await NapCat(bot.ws_url).connect()

        def reminded() -> list[str]:
            return [t for t in napcat.texts("send_private_msg") if "提醒：喝水" in t]

        await wait_for(reminded, timeout=30, what="the reminder")
        await asyncio.sleep(2)
        assert len(reminded()) == 1
        assert len(model.requests_for(MODEL)) == asked  # said with no model call
        await napcat.close()
        assert bot.stop() == 0


async def test_a_daily_reminder_fires_once_a_day_over_a_moved_clock_across_kill_9(
    tmp_path: Path,
) -> None:
    minute = (int(time.time()) // 60 + 2) * 60  # a whole minute ahead, as the bot will see it
    at = datetime.fromtimestamp(minute, UTC).astimezone(SHANGHAI)

    shifts: list[float] = []
    history: list[dict[str, Any]] = []

    def start(due: float, lead_s: float) -> BotProcess:
        shifts.append(due - lead_s - time.time())
        env = {"PALLAS_CLOCK_SHIFT_S": str(shifts[-1])}
        bot = BotProcess(tmp_path, token=ACCESS_TOKEN, env=env)
        bot.start()
        return bot

    async def connect(bot: BotProcess) -> NapCat:
        return await NapCat(bot.ws_url, history, shifts[-1]).connect()

    def reminded(napcat: NapCat) -> list[str]:
        return [t for t in napcat.texts("send_private_msg") if "提醒：吃药" in t]

    bot = start(minute, 25)
    await bot.wait_ready()
    napcat = await connect(bot)
    answer = await command(napcat, f"/提醒 每天{at.hour}:{at.minute:02d} 吃药")
    assert "每天" in answer and "#1" in answer
    await wait_for(lambda: reminded(napcat), timeout=45, what="the first day's reminder")
    bot.kill()  # SIGKILL right after it was said
    await napcat.close()

    bot.start()  # the same moved clock: that day's reminder is not said again
    await bot.wait_ready()
    napcat = await connect(bot)
    await asyncio.sleep(4)
    assert reminded(napcat) == []
    await napcat.close()
    assert bot.stop() == 0

    bot = start(minute + 86400, 20)  # the next day, 20 s before its time
    await bot.wait_ready()
    napcat = await connect(bot)
    assert reminded(napcat) == []
    await wait_for(lambda: reminded(napcat), timeout=45, what="the second day's reminder")
    await asyncio.sleep(2)
    assert len(reminded(napcat)) == 1
    db = TimelineDb(bot.db_path)
    keys = [r[0] for r in db.query("SELECT idempotency_key FROM job WHERE kind = 'task.remind' "
                                   "ORDER BY id")]  # fmt: skip
    assert len(keys) == 3  # day one, day two, and day three queued
    assert db.scalar("SELECT status FROM reminder WHERE id = 1") == "open"
    await napcat.close()
    assert bot.stop() == 0
