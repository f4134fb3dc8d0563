"""End to end: a priced model and a daily budget of 0.02. Thirty @ calls in a row: spending
stops at the cap (one call's overshoot at most), the owner is told once by private message, the
chat hears once, the bot stays up and answers commands, and /状态 shows the spend."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from tests.support.bot_process import BotProcess, running
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, at, next_message_id, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID, OWNER, MEMBER, GROUP = 46_301, 9301, 8301, 7301
MODEL = "e2e-priced"
# The fake model reports 10 prompt and 5 completion tokens: 15,000 per million, 0.015 a call.
PROVIDERS = """
providers:
  - name: local
    base_url: {url}
    api_key: sk-e2e
    models:
      - {{name: {model}, model: {model}, types: [chat, tool], price: {{input: 1000, output: 1000}}}}
"""
BUDGET = 0.02
PER_CALL = 0.015


class NapCat(FakeNapCat):
    def __init__(self, ws_url: str) -> None:
        super().__init__(ws_url, SELF_ID, ACCESS_TOKEN)
        for action in ("send_group_msg", "send_private_msg"):
            self.responders[action] = lambda _params: {"message_id": next_message_id()}

    def said(self, action: str, **where: object) -> list[str]:
        found = []
        for params in self.calls_to(action):
            if all(str(params.get(k)) == str(v) for k, v in where.items()):
                found.append(json.dumps(params.get("message"), ensure_ascii=False))
        return found


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


@pytest.fixture(scope="module")
async def bot(
    tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer
) -> AsyncIterator[BotProcess]:
    workdir = tmp_path_factory.mktemp("budget")
    providers = workdir / "providers.yml"
    providers.write_text(PROVIDERS.format(url=model.base_url, model=MODEL), encoding="utf-8")
    env = {"PALLAS_PROVIDERS_FILE": str(providers), "PALLAS_DAILY_BUDGET": str(BUDGET),
           "SUPERUSERS": f'["{OWNER}"]'}  # fmt: skip
    async with running(BotProcess(workdir, token=ACCESS_TOKEN, env=env)) as process:
        yield process


@pytest.fixture
async def napcat(bot: BotProcess) -> AsyncIterator[NapCat]:
    client = NapCat(bot.ws_url)
    await client.connect()
    yield client
    await client.close()


def reply(words: str) -> Reply:
    return Reply("", (ToolCallSpec("reply", json.dumps({"text": words}, ensure_ascii=False)),))


async def test_thirty_calls_stop_at_the_cap_and_the_owner_is_told_once(
    bot: BotProcess, napcat: NapCat, model: FakeModelServer
) -> None:
    db = TimelineDb(bot.db_path)
    model.script_when(MODEL, lambda _body: True, *[reply("在呢") for _ in range(40)])
    for i in range(30):  # one after another: each its own turn
        turns = _turns(db)
        event = napcat.group_message(GROUP, MEMBER, [at(SELF_ID), text(f" 第{i}次叫你")])
        await napcat.send_event(event)
        await wait_for(lambda t=turns: _turns(db) > t and _turns_running(db) == 0,
                       timeout=15, what=f"call {i}'s turn")  # fmt: skip
    await wait_for(lambda: napcat.said("send_private_msg", user_id=OWNER), timeout=30,
                   what="the owner's notice")  # fmt: skip
    await wait_for(
        lambda: db.scalar("SELECT count(*) FROM message WHERE text LIKE '%第29次叫你%'"),
        what="the thirtieth call stored",
    )
    await wait_for(lambda: [m for m in napcat.said("send_group_msg", group_id=GROUP)
                            if "额度用完" in m], timeout=30, what="the chat's notice")  # fmt: skip
    # Every call past the cap is refused before the model is asked: let the last turns end.
    await wait_for(lambda: _turns_running(db) == 0, timeout=30, what="the turns to end")
    calls = len(model.requests_for(MODEL))
    spent = db.scalar("SELECT sum(cost) FROM llm_call") or 0.0
    assert 1 <= calls <= 3, calls
    assert spent <= BUDGET + PER_CALL + 1e-9, spent
    [notice] = napcat.said("send_private_msg", user_id=OWNER)
    assert "上限" in notice and "0.02" in notice
    group_notices = [m for m in napcat.said("send_group_msg", group_id=GROUP) if "额度用完" in m]
    assert len(group_notices) == 1  # the chat hears once, not thirty times

    # The bot stays up: commands answer, /状态 shows the spend against the cap.
    assert (await bot.health())["ok"] is True
    before = len(napcat.calls_to("send_group_msg"))
    await napcat.send_event(napcat.group_message(GROUP, MEMBER, "/状态"))
    await wait_for(lambda: len(napcat.calls_to("send_group_msg")) > before, what="/状态")
    status = json.dumps(napcat.calls_to("send_group_msg")[-1]["message"], ensure_ascii=False)
    assert "今天全部" in status and "上限 0.02" in status
    assert len(model.requests_for(MODEL)) == calls  # and no model was asked for it
    assert len(napcat.said("send_private_msg", user_id=OWNER)) == 1

    # The owner raises today's cap from a private chat: the next call reaches the model.
    await napcat.send_event(napcat.private_message(OWNER, "/预算 0.1"))
    await wait_for(lambda: len(napcat.said("send_private_msg", user_id=OWNER)) == 2,
                   what="/预算's answer")  # fmt: skip
    assert "上限 0.1" in napcat.said("send_private_msg", user_id=OWNER)[-1]
    turns = _turns(db)
    event = napcat.group_message(GROUP, MEMBER, [at(SELF_ID), text(" 还在吗")])
    await napcat.send_event(event)
    await wait_for(lambda: _turns(db) > turns and _turns_running(db) == 0, what="the turn")
    assert len(model.requests_for(MODEL)) == calls + 1


def _turns(db: TimelineDb) -> int:
    return int(db.scalar("SELECT count(*) FROM event WHERE kind = 'turn_started'") or 0)


def _turns_running(db: TimelineDb) -> int:
    started = db.scalar("SELECT count(*) FROM event WHERE kind = 'turn_started'") or 0
    ended = db.scalar("SELECT count(*) FROM event WHERE kind = 'turn_finished'") or 0
    return int(started) - int(ended)
