"""End to end: the bot learns "早" → "早上好呀" from three pairs of members and answers a
newcomer's "早" with it, no model call; an admin's "不可以" to that line bans it, and it does
not come back, also after a restart (docs/classic.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from pallas.product.classic.learning import FRESH_S
from tests.e2e.test_budget import NapCat
from tests.support.bot_process import BotProcess, running
from tests.support.console_api import put_settings
from tests.support.fake_llm import FakeModelServer
from tests.support.fake_napcat import reply, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import TimelineDb, wait_for

GROUP, ADMIN, NEWCOMER = 7501, 8500, 8599
MODEL = "classic-chat"
TOKEN = "classic-console-token"
LEARNED = "SELECT count(*) FROM outbox WHERE idempotency_key LIKE 'learned:%'"


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


def bot_in(workdir: object, model: FakeModelServer) -> BotProcess:
    env = {"PALLAS_CONSOLE_TOKEN": TOKEN, "LLM_BASE_URL": model.base_url, "LLM_MODEL": MODEL,
           "LLM_API_KEY": "sk-classic"}  # fmt: skip
    return BotProcess(workdir, token=ACCESS_TOKEN, env=env)  # type: ignore[arg-type]


async def said(napcat: NapCat, db: TimelineDb, who: int, words: object, **extra: str) -> None:
    before = db.scalar("SELECT count(*) FROM message WHERE from_bot = 0") or 0
    await napcat.send_event(napcat.group_message(GROUP, who, words, **extra))  # type: ignore[arg-type]
    await wait_for(lambda: (db.scalar("SELECT count(*) FROM message WHERE from_bot = 0") or 0)
                   > before, what="the line stored")  # fmt: skip
    await asyncio.sleep(0.2)  # the stages after the commit


def bot_lines(napcat: NapCat) -> list[str]:
    return [m for m in napcat.said("send_group_msg", group_id=GROUP)]


async def test_a_group_teaches_a_line_and_an_admin_bans_it_for_good(
    tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer
) -> None:
    workdir = tmp_path_factory.mktemp("classic")
    async with running(bot_in(workdir, model)) as bot:
        napcat = NapCat(bot.ws_url)
        await napcat.connect()
        db = TimelineDb(bot.db_path)
        await said(napcat, db, 8000, "大家好")
        sid = str(db.scalar("SELECT id FROM stream WHERE external_id = ?", str(GROUP)))
        # Only well-established pairs, and no cool-down: what the test sees is the rule.
        knobs = {"chance_per_sighting": 0, "cooldown_s": 0}
        await put_settings(bot, TOKEN, "classic", knobs, scope=sid)
        # Two "早" in a row would be the repeater's to echo: this test is about learned lines.
        await put_settings(bot, TOKEN, "features", {"repeat": False}, scope=sid)
        for n in range(3):  # three different pairs of members
            await said(napcat, db, 8100 + n, "早")
            await said(napcat, db, 8200 + n, "早上好呀")
        # Learned within a second (written together, off the messages' path), not yet said.
        pair = "SELECT answerers FROM classic_pair WHERE answer_text = '早上好呀'"
        await wait_for(lambda: db.scalar(pair) == 3, timeout=10, what="the pair learned")
        assert db.scalar(LEARNED) == 0
        await asyncio.sleep(FRESH_S)  # the stage asks the store again: usable within seconds
        asked = len(model.requests_for(MODEL))
        await said(napcat, db, NEWCOMER, "早")
        await wait_for(lambda: db.scalar(LEARNED) == 1, what="the learned answer")
        await wait_for(lambda: any("早上好呀" in m for m in bot_lines(napcat)), what="sent")
        assert len(model.requests_for(MODEL)) == asked  # no model call
        sent_id = ("SELECT platform_message_id FROM outbox "
                   "WHERE idempotency_key LIKE 'learned:%'")  # fmt: skip
        await wait_for(lambda: db.scalar(sent_id), what="the receipt")
        pid = db.scalar("SELECT platform_message_id FROM outbox WHERE idempotency_key LIKE "
                        "'learned:%'")  # fmt: skip
        # A ban word inside a sentence is no ban; the admin's exact "不可以" is.
        await said(napcat, db, ADMIN, [reply(pid), text("这样不可以吧")], role="admin")
        assert db.scalar("SELECT count(*) FROM classic_ban") == 0
        await said(napcat, db, ADMIN, [reply(pid), text("不可以")], role="admin")
        await wait_for(lambda: db.scalar("SELECT count(*) FROM classic_ban") == 1, what="ban")
        await wait_for(lambda: any("不这么说" in m for m in bot_lines(napcat)), what="the ok")
        await said(napcat, db, NEWCOMER + 1, "早")
        await asyncio.sleep(1.0)
        assert db.scalar(LEARNED) == 1  # never again
        await napcat.close()
    async with running(bot_in(workdir, model)) as bot:  # the same store, a new process
        napcat = NapCat(bot.ws_url)
        await napcat.connect()
        db = TimelineDb(bot.db_path)
        await said(napcat, db, NEWCOMER + 2, "早")
        await asyncio.sleep(1.0)
        assert db.scalar(LEARNED) == 1  # the ban stuck
        assert db.scalar("SELECT count FROM classic_pair WHERE answer_text = '早上好呀'") >= 3
        # The console lists the ban and lifts it: the line is said again.
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=bot.http_url, headers=headers) as http:
            learned = (await http.get("/pallas/api/learned")).json()
            [ban] = learned["bans"]
            assert (ban["context"], ban["answer"], ban["everywhere"]) == ("早", "早上好呀", False)
            # "早上好呀" → "早" was learned too: consecutive lines of different members.
            pairs = {(p["context"], p["answer"]): p for p in learned["pairs"]}
            assert pairs[("早", "早上好呀")]["answerers"] == 3
            assert (await http.delete(f"/pallas/api/learned/bans/{ban['id']}")).status_code == 200
            assert (await http.delete("/pallas/api/learned/bans/999999")).status_code == 404
        await said(napcat, db, NEWCOMER + 3, "早")
        await wait_for(lambda: db.scalar(LEARNED) == 2, what="the line, lifted")
        await napcat.close()
