"""End to end: summaries on request, for a latecomer, and the daily digest over a moved clock
across a kill -9 (docs/summaries.md)."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pallas.core.local_time import SHANGHAI
from tests.support.bot_process import BotProcess
from tests.support.fake_llm import FakeModelServer, RecordedRequest, Reply
from tests.support.fake_napcat import FakeNapCat, next_message_id
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID, GROUP, ADMIN, SILENCED = 62001, 6400, 6499, 6498
MODEL = "summary-chat"
NAMES = {6401: "阿青", 6402: "白杨", 6403: "陈皮", 6404: "丁香", 6405: "鹅黄", 6406: "风铃"}
MARK = "整理聊天记录的摘要"  # in the summary call's system prompt, nowhere else


class NapCat(FakeNapCat):
    def __init__(self, ws_url: str) -> None:
        super().__init__(ws_url, SELF_ID, ACCESS_TOKEN)
        for action in ("send_group_msg", "send_private_msg"):
            self.responders[action] = lambda _params: {"message_id": next_message_id()}

    def texts(self, action: str = "send_group_msg") -> list[str]:
        return ["".join(s["data"].get("text", "") for s in p["message"])
                for p in self.calls_to(action)]  # fmt: skip

    async def say(self, user: int, words: str, **extra: Any) -> None:
        event = self.group_message(GROUP, user, words, nickname=NAMES.get(user, ""),
                                   role="admin" if user == ADMIN else "member")  # fmt: skip
        await self.send_event({**event, **extra})


def is_summary(body: dict[str, Any]) -> bool:
    return MARK in json.dumps(body.get("messages", []), ensure_ascii=False)


def summary_requests(model: FakeModelServer) -> list[RecordedRequest]:
    return [r for r in model.requests_for(MODEL) if is_summary(r.body)]


def user_text(request: RecordedRequest) -> str:
    return str(request.body["messages"][-1]["content"])


def env_for(model: FakeModelServer, **extra: str) -> dict[str, str]:
    return {"LLM_BASE_URL": model.base_url, "LLM_MODEL": MODEL, "LLM_API_KEY": "sk-sum",
            "PALLAS_BLOCKED_USERS": json.dumps([str(SILENCED)]), **extra}  # fmt: skip


async def test_summaries_on_request_name_the_speakers_and_are_posted(tmp_path: Path) -> None:
    async with FakeModelServer() as model:
        model.script_when(MODEL, is_summary, Reply("阿青提议周六去爬山，白杨说要带相机。"),
                          Reply("你不在的时候，白杨和陈皮在聊火锅。"))  # fmt: skip
        bot = BotProcess(tmp_path, token=ACCESS_TOKEN, env=env_for(model))
        bot.start()
        await bot.wait_ready()
        napcat = await NapCat(bot.ws_url).connect()
        users = list(NAMES)
        for n in range(50):
            await napcat.say(users[n % 6], f"第{n}句，说说周末的安排{n}")
        await napcat.say(users[0], "/总结")
        said = await wait_for(lambda: [t for t in napcat.texts() if "爬山" in t],
                              timeout=30, what="the summary")  # fmt: skip
        assert said[0].startswith("最近 200 条的聊天（50 条）")
        asked = summary_requests(model)
        assert len(asked) == 1
        shown = user_text(asked[0])
        carried = [n for n in range(50) if f"{NAMES[users[n % 6]]}：第{n}句" in shown]
        assert len(carried) >= 40
        assert asked[0].body["messages"][0]["role"] == "system"
        assert "第0句" not in str(asked[0].body["messages"][0]["content"])  # lines are data

        # A latecomer: what happened after their own last line, and nothing before it.
        await napcat.say(users[3], "我去吃饭了")
        for n in range(6):
            await napcat.say(users[1 + n % 2], f"火锅第{n}句")
        await napcat.say(users[3], "/我错过了什么")
        await wait_for(lambda: [t for t in napcat.texts() if "火锅" in t], what="the catch-up")
        missed = user_text(summary_requests(model)[1])
        assert "火锅第0句" in missed and "火锅第5句" in missed
        assert "我去吃饭了" not in missed and "第49句" not in missed

        # A silenced member asks: nothing. The hourly allowance (3) is said once it is spent.
        await napcat.say(SILENCED, "/总结")
        await napcat.say(users[4], "/总结 3小时")
        await wait_for(lambda: [t for t in napcat.texts() if t.startswith("最近 3 小时")],
                       what="the third summary")  # fmt: skip
        before = len(napcat.texts())
        await napcat.say(users[5], "/总结 200条")
        refused = await wait_for(lambda: napcat.texts()[before:], what="the refusal")
        assert "一小时内最多总结 3 次" in refused[0]
        await asyncio.sleep(1)
        assert len(summary_requests(model)) == 3
        db = TimelineDb(bot.db_path)
        assert db.scalar("SELECT count(*) FROM job WHERE kind = 'summary.make'") == 3
        await napcat.close()
        assert bot.stop() == 0


def shift_to(target: float, lead_s: float) -> float:
    """The clock shift that puts the bot `lead_s` seconds before `target` (epoch seconds)."""
    return target - lead_s - time.time()


async def digests(napcat: NapCat) -> list[str]:
    return [t for t in napcat.texts() if t.startswith("今天的聊天日报")]


async def test_the_daily_digest_is_sent_once_a_day_across_kill_9(tmp_path: Path) -> None:
    hour = (int(time.time()) // 3600 + 1) * 3600  # the next whole hour, as the bot will see it
    local_hour = datetime.fromtimestamp(hour, UTC).astimezone(SHANGHAI).hour
    async with FakeModelServer() as model:
        model.script_when(MODEL, is_summary, Reply("第一天：阿青约大家周六爬山。"),
                          Reply("第二天：白杨买了新相机。"))  # fmt: skip
        shift = shift_to(hour, 25)
        bot = BotProcess(tmp_path, token=ACCESS_TOKEN,
                         env=env_for(model, PALLAS_CLOCK_SHIFT_S=str(shift)))  # fmt: skip
        bot.start()
        await bot.wait_ready()
        napcat = await NapCat(bot.ws_url).connect()
        await napcat.say(ADMIN, f"/日报 开 {local_hour}点")
        on = await wait_for(lambda: [t for t in napcat.texts() if "日报开着" in t], what="on")
        assert f"每天 {local_hour} 点发在群里" in on[0]
        for n in range(8):
            await napcat.say(6401 + n % 3, f"周六爬山第{n}句")
        said = await wait_for_digest(napcat, "第一天")
        bot.kill()  # SIGKILL at the digest's hour, right after it went out
        await napcat.close()
        assert len(said) == 1

        bot.start()  # the same clock: the hour's digest is not sent again
        await bot.wait_ready()
        napcat = await NapCat(bot.ws_url).connect()
        await asyncio.sleep(4)
        assert await digests(napcat) == []
        await napcat.close()
        assert bot.stop() == 0

        tomorrow = hour + 86400
        shift = shift_to(tomorrow, 20)
        bot = BotProcess(tmp_path, token=ACCESS_TOKEN,
                         env=env_for(model, PALLAS_CLOCK_SHIFT_S=str(shift)))  # fmt: skip
        bot.start()
        await bot.wait_ready()
        napcat = await NapCat(bot.ws_url).connect()
        for n in range(5):
            await napcat.say(6402, f"新相机第{n}张", time=int(time.time() + shift))
        said = await wait_for_digest(napcat, "第二天")
        await asyncio.sleep(2)
        assert len(await digests(napcat)) == 1
        asked = summary_requests(model)
        assert len(asked) == 2
        assert "周六爬山第0句" in user_text(asked[0]) and "新相机第4张" in user_text(asked[1])
        assert "周六爬山" not in user_text(asked[1])  # the second day reads its own day
        db = TimelineDb(bot.db_path)
        keys = [row[0] for row in db.query("SELECT idempotency_key FROM job "
                                          "WHERE kind = 'summary.make' ORDER BY id")]  # fmt: skip
        assert len(keys) == 2 and all(k.startswith("digest:") for k in keys)
        await napcat.close()
        assert bot.stop() == 0


async def wait_for_digest(napcat: NapCat, words: str) -> list[str]:
    return await wait_for(lambda: [t for t in napcat.texts() if words in t], timeout=60,
                          what=f"the digest ({words})")  # fmt: skip
