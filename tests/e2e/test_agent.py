"""End to end: an @ in a group becomes a reply in the group, through the whole chain.

fake NapCat (real WebSocket) -> the real bot process -> gate -> batch -> context ->
fake model (real HTTP) -> validated action -> delivery -> NapCat's send_group_msg.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.bot_process import BotProcess
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, at, next_message_id, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.napcat_corpus import corpus_frame
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID = 46_001
MODEL = "e2e-chat"


class NapCat(FakeNapCat):
    """Answers sends with message ids."""

    def __init__(self, ws_url: str) -> None:
        super().__init__(ws_url, SELF_ID, ACCESS_TOKEN)
        self.responders["send_group_msg"] = self._sent
        self.responders["send_private_msg"] = self._sent

    def _sent(self, _params: dict[str, Any]) -> dict[str, int]:
        return {"message_id": next_message_id()}

    def sent_texts(self, action: str = "send_group_msg") -> list[str]:
        return [
            "".join(seg["data"].get("text", "") for seg in call["params"]["message"])
            for call in self.api_calls
            if call["action"] == action
        ]


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


@pytest.fixture(scope="module")
async def bot(
    tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer
) -> AsyncIterator[BotProcess]:
    env = {"LLM_BASE_URL": model.base_url, "LLM_MODEL": MODEL, "LLM_API_KEY": "sk-e2e"}
    process = BotProcess(tmp_path_factory.mktemp("agent"), token=ACCESS_TOKEN, env=env)
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


async def test_an_at_in_a_group_is_answered_in_the_group(
    bot: BotProcess, napcat: NapCat, model: FakeModelServer
) -> None:
    answer = json.dumps({"text": "在的\n找我啥事"}, ensure_ascii=False)
    model.script(MODEL, Reply("", (ToolCallSpec("reply", answer),)))
    event = napcat.group_message(7701, 555, [at(SELF_ID), text(" 在吗")])
    await napcat.send_event(event)

    await wait_for(lambda: len(napcat.sent_texts()) == 2, timeout=15, what="two bubbles sent")
    assert napcat.sent_texts() == ["在的", "找我啥事"]
    sent = [c["params"] for c in napcat.api_calls if c["action"] == "send_group_msg"]
    assert all(params["group_id"] == 7701 for params in sent)
    assert all(isinstance(params["message"], list) for params in sent)  # segment arrays

    timeline = TimelineDb(bot.db_path)
    turn_id = timeline.scalar(
        "SELECT turn_id FROM message WHERE platform_message_id = ?", str(event["message_id"])
    )
    assert turn_id is not None
    kinds = await wait_for(
        lambda: _turn_kinds(timeline, turn_id, until="turn_finished", delivered=2),
        what="the turn's ledger",
    )
    assert kinds[:4] == ["turn_started", "context_assembled", "agent_decided", "reply_queued"]
    assert sorted(kinds[4:]) == ["delivered", "delivered", "turn_finished"]
    calls = await wait_for(
        lambda: timeline.query("SELECT * FROM llm_call WHERE turn_id = ?", turn_id),
        what="the model call's accounting row",
    )
    assert [(c["purpose"], c["model"], c["outcome"]) for c in calls] == [("decision", MODEL, "ok")]
    own = timeline.query("SELECT text FROM message WHERE from_bot = 1 ORDER BY id")
    assert [row["text"] for row in own][-2:] == ["在的", "找我啥事"]
    [request] = model.requests_for(MODEL)
    assert request.api_key == "sk-e2e"
    assert "在吗" in request.body["messages"][-1]["content"]
    assert "在吗" not in request.body["messages"][0]["content"]
    assert (Path(bot.data_dir) / "logs" / "llm").is_dir()


def _turn_kinds(timeline: TimelineDb, turn_id: int, until: str, delivered: int) -> list[str] | None:
    rows = timeline.query("SELECT kind FROM event WHERE turn_id = ? ORDER BY id", turn_id)
    kinds = [row["kind"] for row in rows]
    return kinds if until in kinds and kinds.count("delivered") == delivered else None


async def test_a_reaction_goes_through_napcat_once_it_reported_the_capability(
    bot: BotProcess, napcat: NapCat, model: FakeModelServer
) -> None:
    model.reset()
    timeline = TimelineDb(bot.db_path)
    # Nothing else is being stored now: the next message gets the next id.
    predicted = (timeline.scalar("SELECT max(id) FROM message") or 0) + 1
    react = json.dumps({"message_id": predicted, "emoji": "赞"})
    model.script(MODEL, Reply("", (ToolCallSpec("react", react),)))
    event = napcat.group_message(7702, 556, "牛牛你看这个")
    await napcat.send_event(event)
    stored = await wait_for(
        lambda: timeline.scalar(
            "SELECT id FROM message WHERE platform_message_id = ?", str(event["message_id"])
        ),
        what="the stored message",
    )
    assert stored == predicted
    reactions = await wait_for(
        lambda: [c["params"] for c in napcat.api_calls if c["action"] == "set_msg_emoji_like"],
        timeout=15,
        what="the reaction",
    )
    assert reactions == [{"message_id": event["message_id"], "emoji_id": "76"}]
    [request] = model.requests_for(MODEL)
    offered = {tool["function"]["name"] for tool in request.body["tools"]}
    assert {"react", "poke", "silent"} <= offered  # NapCat reported both capabilities
    assert any(c["action"] == "get_version_info" for c in napcat.api_calls)


async def test_a_temporary_chat_is_answered_through_the_group_it_came_from(
    bot: BotProcess, napcat: NapCat, model: FakeModelServer
) -> None:
    model.script(MODEL, Reply("", (ToolCallSpec("reply", '{"text": "发你了"}'),)))
    event = corpus_frame("message_private_temp")  # NapCat's shape: sub_type "group", group_id
    event.update(self_id=SELF_ID, message_id=next_message_id())
    await napcat.send_event(event)

    await wait_for(lambda: napcat.calls_to("send_private_msg"), timeout=15, what="the reply sent")
    (params,) = napcat.calls_to("send_private_msg")
    assert (params["user_id"], params["group_id"]) == (event["user_id"], event["group_id"])


async def test_a_phone_number_is_masked_and_a_vulgar_bubble_never_reaches_napcat(
    bot: BotProcess, napcat: NapCat, model: FakeModelServer
) -> None:
    timeline, group = TimelineDb(bot.db_path), 7781
    words = "行，我的手机号是 １３８ ００１３ ８０００，有事打我\n你真是个傻逼\n好了不说了"
    answer = json.dumps({"text": words}, ensure_ascii=False)
    model.script(MODEL, Reply("", (ToolCallSpec("reply", answer),)))
    before = len(napcat.sent_texts())
    await napcat.send_event(napcat.group_message(group, 556, [at(SELF_ID), text(" 电话多少")]))
    await wait_for(lambda: len(napcat.sent_texts()) >= before + 2, what="the bubbles that may go")
    await wait_for(
        lambda: timeline.scalar("SELECT count(*) FROM event WHERE kind = 'outgoing_blocked'"),
        what="the refusal's audit",
    )
    sent = napcat.sent_texts()[before:]
    assert sent == ["行，我的手机号是 [已隐藏]，有事打我", "好了不说了"]
    assert not any("傻逼" in s or "８０００" in s for s in napcat.sent_texts())
    rules = timeline.query(
        "SELECT kind, reason FROM event WHERE kind LIKE 'outgoing_%' ORDER BY id"
    )
    assert [(r["kind"], r["reason"]) for r in rules] == [
        ("outgoing_rewritten", "phone"),
        ("outgoing_blocked", "word:傻逼"),
    ]


async def test_at_all_from_the_model_never_reaches_napcat(
    bot: BotProcess, napcat: NapCat, model: FakeModelServer
) -> None:
    timeline, group = TimelineDb(bot.db_path), 7782
    answer = json.dumps({"text": "@全体成员 今晚八点开会"}, ensure_ascii=False)
    model.script(MODEL, Reply("", (ToolCallSpec("reply", answer),)))
    before = len(napcat.sent_texts())
    await napcat.send_event(napcat.group_message(group, 557, [at(SELF_ID), text(" 通知一下")]))
    await wait_for(lambda: len(napcat.sent_texts()) > before, what="the reply")
    [call] = [c for c in napcat.api_calls if c["action"] == "send_group_msg"][before:]
    segments = call["params"]["message"]
    assert not [s for s in segments if s["type"] == "at"]  # no @ of anyone, least of all "all"
    assert napcat.sent_texts()[before] == "全体成员 今晚八点开会"
    # This group's rewrite: another test's may be recorded after it.
    [rewritten] = timeline.query(
        "SELECT e.reason FROM event e JOIN stream s ON s.id = e.stream_id "
        "WHERE e.kind = 'outgoing_rewritten' AND s.external_id = ? ORDER BY e.id DESC LIMIT 1",
        str(group),
    )
    assert rewritten["reason"] == "at_all"
