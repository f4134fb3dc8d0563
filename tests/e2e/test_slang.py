"""End to end: a group's own words through the real bot, fake NapCat and the fake model.

Six lines using 嗯哼酱 and an @: the extraction run after the turn offers `slang.learn` with
the lines it was used in, the meaning is kept with its evidence; once those lines have
scrolled out of the recent conversation, an @ about 嗯哼酱 carries the meaning in its decision
request. The group's short answers become samples that only a call which must reply sees,
and a typical group decision stays within 1,500 estimated tokens with its recent lines.
/黑话 and the console show, correct and delete what was learned (docs/slang.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from tests.support.bot_process import BotProcess
from tests.support.console_api import put_settings
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, at, next_message_id, reply, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID = 46_301
MODEL = "e2e-slang"
TOKEN = "slang-console-token"
CAT_GROUP, TALK_GROUP, NO_MEMORY_GROUP = 7901, 7902, 7903
OWNER = 8900  # the cat's owner: the group's owner
AGENT_FILE = "memory:\n  extraction_delay_s: 2\nslang:\n  learn_delay_s: 2\n"
TEACHING = (
    (8901, "我家嗯哼酱今天又把杯子推下去了"),
    (8902, "哈哈哈嗯哼酱是不是又胖了"),
    (8903, "嗯哼酱最近吃得好多"),
    (8901, "看到嗯哼酱了吗"),
    (8902, "嗯哼醬好可爱"),  # traditional: the same term
    (8903, "昨天嗯哼酱睡在键盘上"),
)
CHATTER = ("今天好冷啊", "晚饭吃什么", "外面下雨了", "作业写完没", "周末去爬山吗",
           "新出的剧好看", "地铁好挤", "刚下班", "明天早起", "好困")  # fmt: skip


def call(name: str, **arguments: object) -> Reply:
    return Reply("", (ToolCallSpec(name, json.dumps(arguments, ensure_ascii=False)),))


def offered(body: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools", [])}


def in_turn(body: dict[str, Any]) -> bool:
    return "reply" in offered(body)


def extraction_with(term: str) -> Callable[[dict[str, Any]], bool]:
    def wants(body: dict[str, Any]) -> bool:
        return "slang__learn" in offered(body) and term in json.dumps(body, ensure_ascii=False)

    return wants


def estimated_tokens(body: dict[str, Any]) -> float:
    """The issue's estimate: 0.6 per Chinese character, 0.3 per other, tool schemas in."""
    contents = [m["content"] for m in body["messages"] if isinstance(m.get("content"), str)]
    counted = "".join(contents) + json.dumps(body.get("tools", []), ensure_ascii=False)
    chinese = len(re.findall(r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]", counted))
    return 0.6 * chinese + 0.3 * (len(counted) - chinese)


def transcript_lines(body: dict[str, Any]) -> list[dict[str, Any]]:
    user = body["messages"][-1]["content"]
    rows = user.split("```jsonl\n", 1)[1].split("\n```", 1)[0]
    return [json.loads(row) for row in rows.splitlines()]


class NapCat(FakeNapCat):
    def __init__(self, ws_url: str) -> None:
        super().__init__(ws_url, SELF_ID, ACCESS_TOKEN)
        self.responders["send_group_msg"] = lambda _params: {"message_id": next_message_id()}

    def said_in(self, group: int) -> list[str]:
        return [
            "".join(s["data"].get("text", "") for s in c["params"]["message"])
            for c in self.api_calls
            if c["action"] == "send_group_msg" and c["params"]["group_id"] == group
        ]


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(default=call("silent", reason="闲聊")) as server:
        yield server


@pytest.fixture(scope="module")
async def bot(
    tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer
) -> AsyncIterator[BotProcess]:
    workdir = tmp_path_factory.mktemp("slang")
    (workdir / "config").mkdir()
    (workdir / "config" / "agent.yml").write_text(AGENT_FILE, encoding="utf-8")
    env = {"LLM_BASE_URL": model.base_url, "LLM_MODEL": MODEL, "LLM_API_KEY": "sk-e2e",
           "PALLAS_CONSOLE_TOKEN": TOKEN, "SUPERUSERS": '["8999"]'}  # fmt: skip
    process = BotProcess(workdir, token=ACCESS_TOKEN, env=env)
    process.start()
    await process.wait_ready()
    yield process
    process.stop()


@pytest.fixture
async def napcat(bot: BotProcess) -> AsyncIterator[NapCat]:
    client = NapCat(bot.ws_url)
    await client.connect()
    yield client
    await client.close()


async def say(
    napcat: NapCat, db: TimelineDb, group: int, user: int, words: str | list[dict[str, Any]],
    role: str = "member",
) -> dict[str, Any]:  # fmt: skip
    """A member says something; returns the event once the line is stored."""
    event = napcat.group_message(group, user, words, nickname=f"u{user}", role=role)
    await napcat.send_event(event)
    await wait_for(lambda: our_id(db, event, missing=0), what=f"{words!r} stored")
    return event


def our_id(db: TimelineDb, event: dict[str, Any], missing: int | None = None) -> int:
    found = db.scalar("SELECT id FROM message WHERE platform_message_id = ?",
                      str(event["message_id"]))  # fmt: skip
    if found is None and missing is not None:
        return missing
    return int(found)


async def at_bot(
    napcat: NapCat, db: TimelineDb, group: int, user: int, words: str, role: str = "member"
) -> dict[str, Any]:
    before = len(napcat.said_in(group))
    event = await say(napcat, db, group, user, [at(SELF_ID), text(f" {words}")], role)
    await wait_for(lambda: len(napcat.said_in(group)) > before, timeout=20, what="the answer")
    return event


def turn_asking(words: str) -> Callable[[dict[str, Any]], bool]:
    def wants(body: dict[str, Any]) -> bool:
        return in_turn(body) and words in body["messages"][-1]["content"]

    return wants


async def test_a_term_said_six_times_is_learned_and_explained_after_it_scrolled_out(
    bot: BotProcess, napcat: NapCat, model: FakeModelServer
) -> None:
    db = TimelineDb(bot.db_path)
    taught = [our_id(db, await say(napcat, db, CAT_GROUP, user, words))
              for user, words in TEACHING]  # fmt: skip
    learned = call("slang__learn", term="嗯哼酱", meaning="群主家的猫", examples=taught[3:])
    model.script_when(MODEL, extraction_with("嗯哼酱"), learned)
    model.script_when(MODEL, turn_asking("嗯哼酱在干嘛"), call("reply", text="不知道呀"))
    await at_bot(napcat, db, CAT_GROUP, 8901, "你说嗯哼酱在干嘛")

    # Within the extraction window: one call offers slang.learn over the lines it was used in.
    await wait_for(lambda: db.scalar("SELECT meaning FROM slang_term WHERE term = '嗯哼酱'"),
                   timeout=40, what="the meaning learned")  # fmt: skip
    [asked] = [r.body for r in model.requests_for(MODEL) if extraction_with("嗯哼酱")(r.body)]
    payload = json.loads(asked["messages"][-1]["content"])
    [candidate] = [c for c in payload["slang_candidates"] if c["term"] == "嗯哼酱"]
    shown = {m["message_id"] for m in payload["messages"]}
    assert set(candidate["用到它的消息"]) <= shown and len(candidate["用到它的消息"]) >= 3
    assert "嗯哼酱" not in asked["messages"][0]["content"]  # the lines are data, not the system
    row = db.query("SELECT source, lines, members, learned_from FROM slang_term "
                   "WHERE term = '嗯哼酱'")[0]  # fmt: skip
    assert row["source"] == "learned" and row["lines"] >= 6
    assert len(json.loads(row["members"])) == 3 and json.loads(row["learned_from"]) == taught[3:]

    # The teaching lines scroll out; an @ about the cat carries the meaning, once.
    for n, words in enumerate(CHATTER):
        await say(napcat, db, CAT_GROUP, 8904 + n % 3, words)
    model.script_when(MODEL, turn_asking("嗯哼酱今天乖吗"), call("reply", text="应该乖吧"))
    await at_bot(napcat, db, CAT_GROUP, 8902, "嗯哼酱今天乖吗")
    [turn] = [r.body for r in model.requests_for(MODEL) if turn_asking("嗯哼酱今天乖吗")(r.body)]
    user, system = turn["messages"][-1]["content"], turn["messages"][0]["content"]
    assert "嗯哼酱：群主家的猫" in user and "群主家的猫" not in system
    shown = json.dumps(transcript_lines(turn), ensure_ascii=False)
    assert all(words not in shown for _, words in TEACHING)  # scrolled out: only the meaning
    assert user.count("群主家的猫") == 1

    # /黑话 shows it; an admin corrects it; a member cannot delete; the admin deletes it.
    await say(napcat, db, CAT_GROUP, 8903, "/黑话")
    await wait_for(lambda: any("嗯哼酱：群主家的猫" in s for s in napcat.said_in(CAT_GROUP)),
                   what="the listing")  # fmt: skip
    await say(napcat, db, CAT_GROUP, 8902, "/黑话 删 嗯哼酱")
    await wait_for(lambda: any("要群主或管理员" in s for s in napcat.said_in(CAT_GROUP)),
                   what="a member refused")  # fmt: skip
    await say(napcat, db, CAT_GROUP, OWNER, "/黑话 嗯哼酱=群主家的橘猫", role="owner")
    await wait_for(lambda: db.scalar("SELECT source FROM slang_term WHERE term = '嗯哼酱'")
                   == "admin", what="the correction")  # fmt: skip
    assert db.scalar("SELECT meaning FROM slang_term WHERE term = '嗯哼酱'") == "群主家的橘猫"

    # The console lists the group, shows the lines it was learned from, and deletes it.
    headers = {"Authorization": f"Bearer {TOKEN}"}
    stream = db.scalar("SELECT stream_id FROM message WHERE id = ?", taught[0])
    async with httpx.AsyncClient(base_url=bot.http_url, headers=headers) as http:
        groups = (await http.get("/pallas/api/slang")).json()["groups"]
        assert any(g["group"] == str(CAT_GROUP) and g["terms"] == 1 for g in groups)
        one = (await http.get(f"/pallas/api/slang/{stream}")).json()
        [cat] = [t for t in one["terms"] if t["term"] == "嗯哼酱"]
        assert cat["meaning"] == "群主家的橘猫" and cat["learned_from"][0]["id"] == taught[3]
        assert "看到嗯哼酱了吗" in cat["learned_from"][0]["text"]
        insult = await http.put(f"/pallas/api/slang/{stream}/terms",
                                json={"term": "小胖", "meaning": "群里的傻逼"})  # fmt: skip
        assert insult.status_code == 400
        gone = await http.delete(f"/pallas/api/slang/{stream}/terms", params={"term": "嗯哼酱"})
        assert gone.status_code == 200
        assert (await http.get("/pallas/pages/slang")).status_code == 200
    assert db.scalar("SELECT source FROM slang_term WHERE term = '嗯哼酱'") == "deleted"


async def test_samples_reach_only_a_call_that_must_reply_within_a_typical_prompt(
    bot: BotProcess, napcat: NapCat, model: FakeModelServer
) -> None:
    db = TimelineDb(bot.db_path)
    # Forty lines of chatter among five members, some of them short answers to another's line.
    for n in range(20):
        asked = await say(napcat, db, TALK_GROUP, 8911 + n % 5, f"{CHATTER[n % 10]}，第{n}次")
        if n % 4 == 0:
            await say(napcat, db, TALK_GROUP, 8912 + n % 5,
                      [reply(asked["message_id"]), text(("收到收到", "笑死我了", "确实确实",
                                                        "好耶～", "我也是")[n // 4])])  # fmt: skip
    model.script_when(MODEL, turn_asking("先问一句"), call("reply", text="在呢"))
    first = await at_bot(napcat, db, TALK_GROUP, 8911, "先问一句")
    stream = db.scalar("SELECT stream_id FROM message WHERE id = ?", our_id(db, first))
    await wait_for(lambda: db.scalar("SELECT count(*) FROM expression_sample WHERE stream_id = ?",
                                     stream) >= 5, timeout=40, what="the samples kept")  # fmt: skip
    kept = {row["text"] for row in db.query("SELECT text FROM expression_sample")}
    assert {"收到收到", "笑死我了", "确实确实", "好耶～", "我也是"} <= kept
    for n in range(20 - 6):
        await say(napcat, db, TALK_GROUP, 8911 + n % 5, f"{CHATTER[(n + 3) % 10]}呀")
    model.script_when(MODEL, turn_asking("你觉得呢"), call("reply", text="我也觉得"))
    await at_bot(napcat, db, TALK_GROUP, 8913, "大家刚才说的你觉得呢")
    [decision] = [r.body for r in model.requests_for(MODEL) if turn_asking("你觉得呢")(r.body)]
    assert "silent" not in offered(decision)  # an @ must be answered
    user = decision["messages"][-1]["content"]
    assert "群友平时怎么接话" in user
    block = user.split("群友平时怎么接话", 1)[1].split("\n【", 1)[0]
    assert 1 <= block.count("「") <= 3
    lines = transcript_lines(decision)
    tokens = estimated_tokens(decision)
    print(f"decision prompt: {tokens:.0f} estimated tokens, {len(lines)} lines shown")
    assert tokens <= 1500 and len(lines) >= 6

    # The natural window after the answer: a decision that may stay silent sees no samples.
    model.script_when(MODEL, turn_asking("那我先走了"), call("silent", reason="道别"))
    await say(napcat, db, TALK_GROUP, 8914, "那我先走了")
    leaving = turn_asking("那我先走了")
    await wait_for(lambda: any(leaving(r.body) for r in model.requests_for(MODEL)),
                   what="the ambient turn")  # fmt: skip
    [ambient] = [r.body for r in model.requests_for(MODEL) if turn_asking("那我先走了")(r.body)]
    assert "silent" in offered(ambient)
    assert "群友平时怎么接话" not in ambient["messages"][-1]["content"]


async def test_a_group_without_memory_learns_in_a_call_of_its_own(
    bot: BotProcess, napcat: NapCat, model: FakeModelServer
) -> None:
    db = TimelineDb(bot.db_path)
    first = await say(napcat, db, NO_MEMORY_GROUP, 8921, "大家好")
    stream = db.scalar("SELECT stream_id FROM message WHERE id = ?", our_id(db, first))
    await put_settings(bot, TOKEN, "features", {"memory": False}, str(stream))
    lines = [("8921", "阿珂珂又迟到了"), ("8922", "等阿珂珂来了再开"), ("8923", "阿珂珂说马上到")]
    for user, words in lines:
        await say(napcat, db, NO_MEMORY_GROUP, int(user), words)

    def learning(body: dict[str, Any]) -> bool:
        said = json.dumps(body, ensure_ascii=False)
        return offered(body) == {"slang__learn"} and "阿珂珂" in said

    model.script_when(MODEL, learning, call("slang__learn", term="阿珂珂", meaning="总迟到的队长"))
    model.script_when(MODEL, turn_asking("人齐了吗"), call("reply", text="还差一个"))
    await at_bot(napcat, db, NO_MEMORY_GROUP, 8922, "人齐了吗")
    await wait_for(lambda: db.scalar("SELECT meaning FROM slang_term WHERE term = '阿珂珂'"),
                   timeout=40, what="learned without memory")  # fmt: skip
    asked = [r.body for r in model.requests_for(MODEL) if learning(r.body)]
    assert len(asked) == 1 and "memory__remember" not in offered(asked[0])
    assert not db.scalar("SELECT count(*) FROM memory_cursor WHERE stream_id = ?", stream)
