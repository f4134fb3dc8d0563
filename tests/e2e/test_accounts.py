"""End to end: two QQ accounts of the bot in one group, both NapCats delivering the same
messages (each with its own message ids, the same `real_seq`): the group hears the bot once,
an @ or an exclusive name hands the reply to its account (docs/accounts.md)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pallas.product.conversation.accounts.pick import rank
from tests.support.bot_process import BotProcess, running
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, at, next_message_id, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import TimelineDb, wait_for

A, B = 52001, 52002
MODEL = "accounts-chat"
# A group whose speaker is account A: a call that names nobody in particular goes to A, so
# an answer from B shows the hand-over, not the luck of the hash.
GROUP = next(g for g in range(9100, 9200) if rank(str(g), str(A)) > rank(str(g), str(B)))
NEWCOMER = 7777
_seqs = itertools.count(50_000)


class Account(FakeNapCat):
    def __init__(self, ws_url: str, self_id: int) -> None:
        super().__init__(ws_url, self_id, ACCESS_TOKEN)
        self.responders["send_group_msg"] = lambda _p: {"message_id": next_message_id()}
        self.responders["get_stranger_info"] = lambda p: {"nickname": f"u{p['user_id']}"}

    def sends(self) -> list[str]:
        return [
            json.dumps(p.get("message"), ensure_ascii=False)
            for p in self.calls_to("send_group_msg")
            if str(p.get("group_id")) == str(GROUP)
        ]


def reply(words: str) -> Reply:
    return Reply("", (ToolCallSpec("reply", json.dumps({"text": words}, ensure_ascii=False)),))


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        server.script_when(MODEL, lambda _body: True, *[reply("在呢在呢") for _ in range(40)])
        yield server


@pytest.fixture(scope="module")
async def bot(
    tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer
) -> AsyncIterator[BotProcess]:
    env = {"LLM_BASE_URL": model.base_url, "LLM_MODEL": MODEL, "LLM_API_KEY": "sk-accounts",
           "NICKNAME": '["牛牛"]', "PALLAS_ACCOUNT_NAMES": json.dumps({str(B): ["小二"]})}
    process = BotProcess(tmp_path_factory.mktemp("accounts"), token=ACCESS_TOKEN, env=env)
    process.data_dir.mkdir(parents=True)
    notices = {str(GROUP): {"welcome": "欢迎 {at}"}}
    (process.data_dir / "notices.json").write_text(json.dumps(notices), encoding="utf-8")
    async with running(process):
        yield process


@pytest.fixture(scope="module")
async def accounts(bot: BotProcess) -> AsyncIterator[tuple[Account, Account]]:
    a, b = Account(bot.ws_url, A), Account(bot.ws_url, B)
    await a.connect()
    await b.connect()
    yield a, b
    await a.close()
    await b.close()


@pytest.fixture
def db(bot: BotProcess) -> TimelineDb:
    return TimelineDb(bot.db_path)


async def both_see(
    pair: tuple[Account, Account], user: int, words: Any, *, skew_s: int = 0
) -> str:
    """The same QQ message through both accounts at once: own ids, the same sequence."""
    seq, at_s = str(next(_seqs)), int(time.time())
    a, b = pair
    first = {**a.group_message(GROUP, user, words), "real_seq": seq, "time": at_s}
    second = {**b.group_message(GROUP, user, words), "real_seq": seq, "time": at_s + skew_s}
    await asyncio.gather(a.send_event(first), b.send_event(second))
    return seq


async def heard(pair: tuple[Account, Account], before: int, db: TimelineDb) -> list[str]:
    """What the group heard since `before` sends, once the bot has settled."""
    a, b = pair
    await wait_for(lambda: len(a.sends()) + len(b.sends()) > before, what="an answer")
    await wait_for(lambda: _turns_running(db) == 0, what="the turns to end")
    await asyncio.sleep(1.5)  # a second answer would have been queued by now
    return [*a.sends(), *b.sends()][before:]


def _turns_running(db: TimelineDb) -> int:
    started = db.scalar("SELECT count(*) FROM event WHERE kind = 'turn_started'") or 0
    ended = db.scalar("SELECT count(*) FROM event WHERE kind = 'turn_finished'") or 0
    return int(started) - int(ended)


def sent(pair: tuple[Account, Account]) -> int:
    return len(pair[0].sends()) + len(pair[1].sends())


async def test_a_repeatable_line_is_repeated_once(
    accounts: tuple[Account, Account], db: TimelineDb
) -> None:
    before = sent(accounts)
    for user in (3101, 3102):
        await both_see(accounts, user, "今天也要复读")
        await asyncio.sleep(0.3)
    answers = await heard(accounts, before, db)
    # Said once (the bot may also have been chatting: every answer is heard once).
    assert answers.count(json.dumps([text("今天也要复读")], ensure_ascii=False)) == 1
    assert len(answers) == len(set(answers))
    assert db.scalar("SELECT count(*) FROM message WHERE text = '今天也要复读'") == 3  # 2 + ours


async def test_a_name_call_is_answered_once_and_stored_once(
    accounts: tuple[Account, Account], db: TimelineDb, model: FakeModelServer
) -> None:
    a, b = accounts
    before, asked = sent(accounts), len(model.requests_for(MODEL))
    before_a, before_b = len(a.sends()), len(b.sends())
    seq = await both_see(accounts, 3001, "牛牛 你在吗")
    answers = await heard(accounts, before, db)
    assert len(answers) == 1 and "在呢在呢" in answers[0]
    # The group's speaker, A, answered.
    assert (len(a.sends()), len(b.sends())) == (before_a + 1, before_b)
    assert len(model.requests_for(MODEL)) == asked + 1
    rows = db.query("SELECT id FROM message WHERE seq_key = ?", f"s:{seq}")
    assert len(rows) == 1
    copies = db.query("SELECT self_id FROM message_copy WHERE message_id = ?", rows[0]["id"])
    assert [c["self_id"] for c in copies] == [str(B)]
    # B sees A's answer as a group message from A: the bot's own, never answered.
    await b.send_event(b.group_message(GROUP, A, "在呢在呢"))
    await asyncio.sleep(1.5)
    assert sent(accounts) == before + 1
    assert db.scalar("SELECT count(*) FROM message WHERE text = '在呢在呢' AND from_bot = 0") == 0


async def test_a_newcomer_is_welcomed_once_though_both_accounts_report_the_join(
    accounts: tuple[Account, Account], db: TimelineDb
) -> None:
    a, b = accounts
    before = sent(accounts)
    join_a = {**a.member_change(GROUP, NEWCOMER, joined=True), "time": int(time.time())}
    join_b = {**b.member_change(GROUP, NEWCOMER, joined=True), "time": int(time.time()) + 3}
    await asyncio.gather(a.send_event(join_a), b.send_event(join_b))
    answers = await heard(accounts, before, db)
    assert len(answers) == 1 and str(NEWCOMER) in answers[0]
    assert db.scalar("SELECT count(*) FROM event WHERE kind = 'member_joined'") == 1


@pytest.mark.parametrize("call", ["at", "exclusive_name"])
async def test_a_call_to_the_second_account_is_answered_by_it_alone(
    accounts: tuple[Account, Account], db: TimelineDb, call: str
) -> None:
    a, b = accounts
    before_a, before_b = len(a.sends()), len(b.sends())
    words = [at(B), text(" 你在吗")] if call == "at" else "小二 你在吗"
    await both_see(accounts, 3201, words)
    answers = await heard(accounts, before_a + before_b, db)
    assert len(answers) == 1 and "在呢在呢" in answers[0]
    assert len(b.sends()) == before_b + 1 and len(a.sends()) == before_a
