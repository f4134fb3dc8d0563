"""End to end: a group's recorded hour, with its gate settings changed in the middle from the
console, replayed by `python -m pallas replay` after the fact: the replay under the settings
of the day decides every message as the gate really did, and prices a proposed setting beside
what really happened."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import async_playwright

from pallas.core.local_time import SHANGHAI
from tests.e2e.test_budget import MODEL, PROVIDERS, NapCat, reply
from tests.e2e.test_console_browser import CHROMIUM, FLAGS
from tests.support.bot_process import REPO_ROOT, BotProcess, running
from tests.support.console_api import put_settings, signed_in_page
from tests.support.fake_llm import FakeModelServer
from tests.support.fake_napcat import at, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID, MEMBER, OTHER, GROUP = 46_301, 8401, 8402, 7401
TOKEN = "replay-console-token"


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


@pytest.fixture(scope="module")
async def bot(
    tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer
) -> AsyncIterator[BotProcess]:
    workdir = tmp_path_factory.mktemp("replay")
    providers = workdir / "providers.yml"
    providers.write_text(PROVIDERS.format(url=model.base_url, model=MODEL), encoding="utf-8")
    env = {"PALLAS_PROVIDERS_FILE": str(providers), "PALLAS_CONSOLE_TOKEN": TOKEN,
           "PALLAS_DAILY_BUDGET": "1"}  # fmt: skip
    async with running(BotProcess(workdir, token=ACCESS_TOKEN, env=env)) as process:
        yield process


@pytest.fixture
async def napcat(bot: BotProcess) -> AsyncIterator[NapCat]:
    client = NapCat(bot.ws_url)
    await client.connect()
    yield client
    await client.close()


async def said(napcat: NapCat, db: TimelineDb, who: int, words: Any) -> None:
    """A member's line, and whatever turn it started, finished."""
    before = _count(db, "SELECT count(*) FROM event WHERE kind LIKE 'gate_%'")
    await napcat.send_event(napcat.group_message(GROUP, who, words))
    await wait_for(lambda: _count(db, "SELECT count(*) FROM event WHERE kind LIKE 'gate_%'")
                   > before, what="the gate's decision")  # fmt: skip
    await wait_for(lambda: _idle(db), timeout=20, what="the turn to end")


def _count(db: TimelineDb, query: str) -> int:
    return int(db.scalar(query) or 0)


def _idle(db: TimelineDb) -> bool:
    started = _count(db, "SELECT count(*) FROM event WHERE kind = 'turn_started'")
    ended = _count(db, "SELECT count(*) FROM event WHERE kind = 'turn_finished'")
    buffered = _count(db, "SELECT count(*) FROM event WHERE kind = 'gate_passed'")
    taken = _count(db, "SELECT count(*) FROM message WHERE turn_id IS NOT NULL AND from_bot = 0")
    # The reply sent and its echo stored: the next line sees the bot has spoken.
    queued = _count(db, "SELECT count(*) FROM outbox WHERE status IN ('pending', 'sending')")
    sent = _count(db, "SELECT count(*) FROM outbox WHERE status = 'sent'")
    echoed = _count(db, "SELECT count(*) FROM message WHERE from_bot = 1")
    return started == ended and buffered <= taken and queued == 0 and echoed >= sent


def replay_text(bot: BotProcess, since: datetime, until: datetime, *args: str) -> str:
    command = [sys.executable, "-m", "pallas", "replay", "--group", str(GROUP),
               "--since", since.isoformat(), "--until", until.isoformat(), *args]  # fmt: skip
    env = bot.env() | {"PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(command, cwd=bot.workdir, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def replay(bot: BotProcess, since: datetime, until: datetime, *changes: str) -> dict[str, Any]:
    sets = [arg for change in changes for arg in ("--set", change)]
    report: dict[str, Any] = json.loads(replay_text(bot, since, until, "--json", *sets))
    return report


async def test_a_recorded_hour_replays_as_decided_and_prices_a_proposal(
    bot: BotProcess, napcat: NapCat, model: FakeModelServer
) -> None:
    db = TimelineDb(bot.db_path)
    model.script_when(MODEL, lambda _body: True, *[reply("嗯嗯") for _ in range(30)])
    since = datetime.now(UTC) - timedelta(seconds=5)
    await said(napcat, db, MEMBER, "大家晚上好")
    sid = str(db.scalar("SELECT id FROM stream WHERE external_id = ?", str(GROUP)))
    quiet = {"ambient_probability": 0, "max_replies_in_window": 1}
    await put_settings(bot, TOKEN, "gate", quiet, scope=sid)
    await said(napcat, db, OTHER, "今天好冷啊")  # nobody called: dropped
    await said(napcat, db, MEMBER, [at(SELF_ID), text(" 在吗")])  # @: answered
    await said(napcat, db, OTHER, "哈哈哈你来啦")  # after its reply, but one reply is the cap
    await put_settings(bot, TOKEN, "gate", {"max_replies_in_window": 5}, scope=sid)
    await said(napcat, db, OTHER, "你吃饭了没")  # the same moment, under the raised cap: a turn
    await said(napcat, db, MEMBER, "我去做饭了")
    await asyncio.sleep(0.5)
    until = datetime.now(UTC) + timedelta(seconds=5)
    calls = len(model.requests_for(MODEL))

    report = replay(bot, since, until, "ambient_probability=1", "ambient_cooldown_s=0",
                    "ambient_hourly_budget=10")  # fmt: skip
    recorded, in_force = report["recorded"], report["in_force"]
    assert recorded["gated"] == 6 and report["agreed"] == 6, report
    assert in_force == recorded  # the gate's decisions, exactly
    assert recorded["called"] == 1 and recorded["dropped"]["frequency_cap"] == 1
    assert recorded["own"] >= 1  # after the cap was raised
    # Under today's cap all along, the capped line would have passed: the history of the
    # change is what made the replay exact.
    today = replay(bot, since, until, "max_replies_in_window=5")
    assert "frequency_cap" not in today["proposal"]["dropped"], today["proposal"]
    assert today["proposal"]["own"] == recorded["own"] + 1
    assert report["costs"]["calls"] == calls and calls >= 2
    assert report["costs"]["cost_per_call"] == pytest.approx(0.015)
    proposal, estimate = report["proposal"], report["proposal_estimate"]
    assert proposal["own"] > recorded["own"] and "attention_filtered" not in proposal["dropped"]
    assert estimate["cost"] > report["in_force_estimate"]["cost"]
    assert report["in_force_estimate"]["calls"] == pytest.approx(calls)
    # As the owner reads it.
    told = replay_text(bot, since, until, "--set", "ambient_probability=1")
    assert "与实际一致：6/6 条" in told and "按提议设置（ambient_probability=1）" in told
    assert "门控的决定是精确重放的；模型部分是估算" in told


async def test_the_console_replays_the_day_and_changes_todays_cap(bot: BotProcess) -> None:
    """After the hour above: the console's replay page and API, and its budget form."""
    today = datetime.now(SHANGHAI).date().isoformat()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=bot.http_url, headers=headers) as http:
        asked = {"group": str(GROUP), "day": today, "set": "ambient_probability=1"}
        report = (await http.get("/pallas/api/replay", params=asked)).json()
        assert report["agreed"] == report["recorded"]["gated"] == 6
        wrong = await http.get("/pallas/api/replay", params={"group": "1", "day": today})
        assert wrong.status_code == 400 and "没有群 1 的记录" in wrong.json()["detail"]
        budget = (await http.get("/pallas/api/budget")).json()
        assert budget["active"] and budget["cost_cap"] == 1 and budget["cost"] > 0
        refused = await http.put("/pallas/api/budget", json={"cost": -1})
        assert refused.status_code == 400
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = await signed_in_page(browser, bot, TOKEN)
        await page.goto("/pallas/replay")
        await page.fill("#group", str(GROUP))
        await page.fill("#day", today)
        await page.fill("#changes", "max_replies_in_window=5")
        await page.click("#run-replay")
        told = await page.inner_text("#replay-report")
        assert "与实际一致：6/6 条" in told and "按提议设置（max_replies_in_window=5）" in told
        await page.goto("/pallas/models")
        assert "上限 1" in await page.inner_text("#budget-today")
        await page.fill("#budget-cost", "2.5")
        await page.click("#budget-save")
        await page.wait_for_url("**/pallas/models*")
        assert "上限 2.5" in await page.inner_text("#budget-today")
        await browser.close()


def test_a_replay_of_a_group_never_seen_says_so(tmp_path: Path) -> None:
    bot = BotProcess(tmp_path)
    command = [sys.executable, "-m", "pallas", "replay", "--group", "1", "--day", "2026-12-01"]
    done = subprocess.run(command, cwd=tmp_path, env=bot.env(), capture_output=True, timeout=60)
    assert done.returncode == 2
    assert "重放不了" in done.stderr.decode()
