"""End to end: the bot's feelings through the real bot process, fake NapCat, the fake model and
a local SMTP server.

Someone who keeps insulting the bot is silenced (their messages stored and flagged, nothing
answers), then, silenced twice within the day, put on the group's blacklist, and the owner is
told by private message, or by e-mail when the private message fails. A later turn's prompt
carries the favorability tier and the relation note a person gave about themselves.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.bot_process import BotProcess
from tests.support.console_api import put_settings
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, at, text
from tests.support.fake_smtp import FakeSmtpServer
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID = 46_401
OWNER, MING, RUDE, RUDER = 9001, 9101, 9201, 9301
GROUP, OTHER_GROUP = 8101, 8102
CHAT = "e2e-persona"
TOKEN = "persona-console-token"
# Silences of under two seconds, so the test sees one end and the next one begin.
SILENCE_S = 1.8
AGENT_FILE = f"""\
memory:
  enabled: false
rage:
  silence_minutes: {SILENCE_S / 60}
  notify_check_s: 2
"""


def reply(words: str) -> Reply:
    return Reply("", (ToolCallSpec("reply", json.dumps({"text": words}, ensure_ascii=False)),))


class NapCat(FakeNapCat):
    def __init__(self, ws_url: str) -> None:
        super().__init__(ws_url, SELF_ID, ACCESS_TOKEN)
        self.answer_sends()

    def sent(self, action: str) -> list[dict[str, Any]]:
        return self.calls_to(action)


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(default=reply("嗯")) as server:
        yield server


@pytest.fixture(scope="module")
async def smtp() -> AsyncIterator[FakeSmtpServer]:
    async with FakeSmtpServer() as server:
        yield server


@pytest.fixture(scope="module")
async def bot(
    tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer, smtp: FakeSmtpServer
) -> AsyncIterator[BotProcess]:
    workdir = tmp_path_factory.mktemp("persona")
    (workdir / "config").mkdir()
    (workdir / "config" / "agent.yml").write_text(AGENT_FILE, encoding="utf-8")
    env = {
        "LLM_BASE_URL": model.base_url,
        "LLM_MODEL": CHAT,
        "LLM_API_KEY": "sk-e2e",
        "SUPERUSERS": f'["{OWNER}"]',
        "PALLAS_SMTP_HOST": "127.0.0.1",
        "PALLAS_SMTP_PORT": str(smtp.port),
        "PALLAS_SMTP_FROM": "bot@example.invalid",
        "PALLAS_SMTP_TO": '["owner@example.invalid"]',
        "PALLAS_SMTP_STARTTLS": "false",
        "PALLAS_CONSOLE_TOKEN": TOKEN,
    }
    process = BotProcess(workdir, token=ACCESS_TOKEN, env=env)
    process.start()
    await process.wait_ready()
    yield process
    process.stop()


@pytest.fixture(scope="module")
async def napcat(bot: BotProcess) -> AsyncIterator[NapCat]:
    client = NapCat(bot.ws_url)
    await client.connect()
    yield client
    await client.close()


@pytest.fixture(scope="module")
def timeline(bot: BotProcess) -> TimelineDb:
    return TimelineDb(bot.db_path)


async def say(napcat: NapCat, group: int, user: int, words: str) -> dict[str, Any]:
    event = napcat.group_message(group, user, [at(SELF_ID), text(f" {words}")])
    await napcat.send_event(event)
    return event


def outcomes(timeline: TimelineDb, user: int) -> list[str]:
    rows = timeline.query(
        "SELECT e.reason FROM event e JOIN identity i ON i.person_id = e.person_id "
        "WHERE e.kind = 'attack_noted' AND i.user_id = ? ORDER BY e.id",
        str(user),
    )
    return [row["reason"] for row in rows]


def suppressed(timeline: TimelineDb, event: dict[str, Any]) -> bool:
    rows = timeline.messages(event["message_id"])
    return bool(rows and rows[0]["suppressed"])


async def insult_until(
    napcat: NapCat, timeline: TimelineDb, group: int, user: int, outcome: str
) -> dict[str, Any]:
    """Insult the bot until the attack has the outcome; the last insult."""
    for _ in range(4):
        before = len(outcomes(timeline, user))
        event = await say(napcat, group, user, "你是傻逼")
        await wait_for(
            lambda b=before: len(outcomes(timeline, user)) > b, timeout=10, what="the attack"
        )
        if outcomes(timeline, user)[-1] == outcome:
            return event
    raise AssertionError(f"no {outcome}: {outcomes(timeline, user)}")


async def test_a_later_prompt_carries_the_tier_and_the_relation_note(
    napcat: NapCat, model: FakeModelServer
) -> None:
    before = len(napcat.sent("send_group_msg"))
    await say(napcat, GROUP, MING, "以后叫我阿明")
    await wait_for(lambda: len(napcat.sent("send_group_msg")) > before, timeout=20, what="reply")
    model.script(CHAT, reply("在的"))
    await say(napcat, GROUP, MING, "在吗")
    await wait_for(
        lambda: len(napcat.sent("send_group_msg")) > before + 1, timeout=20, what="reply"
    )
    prompt = json.dumps(model.requests_for(CHAT)[-1].body["messages"], ensure_ascii=False)
    assert "好感普通" in prompt and "希望被叫作阿明" in prompt


async def test_insults_silence_then_blacklist_and_the_owner_hears_by_private_message(
    napcat: NapCat, model: FakeModelServer, timeline: TimelineDb, smtp: FakeSmtpServer
) -> None:
    silenced = await insult_until(napcat, timeline, GROUP, RUDE, "silenced")
    # The attack's event may commit a moment before the message's flag.
    await wait_for(lambda: suppressed(timeline, silenced), timeout=10, what="flagged")
    await ignored_while_silent(napcat, model, timeline, GROUP, RUDE)

    await asyncio.sleep(SILENCE_S + 0.5)  # the silence ends; two more insults: the blacklist
    await insult_until(napcat, timeline, GROUP, RUDE, "blacklisted")
    notices = await wait_for(
        lambda: [c for c in napcat.sent("send_private_msg") if c["user_id"] == OWNER],
        timeout=20,
        what="the owner's private message",
    )
    words = "".join(seg["data"].get("text", "") for seg in notices[0]["message"])
    assert str(RUDE) in words and f"/解除拉黑 {GROUP} {RUDE}" in words
    listed = timeline.query("SELECT source FROM blacklist WHERE lifted_at IS NULL")
    assert [row["source"] for row in listed] == ["auto"]
    await asyncio.sleep(SILENCE_S + 0.5)  # long past the silence: the blacklist still holds
    await ignored_while_silent(napcat, model, timeline, GROUP, RUDE)
    await wait_for(lambda: _checked(timeline), timeout=20, what="the notice checked")
    assert smtp.messages == []  # the private message arrived: no e-mail


async def ignored_while_silent(
    napcat: NapCat, model: FakeModelServer, timeline: TimelineDb, group: int, user: int
) -> None:
    """Their message is stored and flagged, and nothing answers it: no model, no reply."""
    await wait_for(lambda: settled(timeline), timeout=20, what="earlier turns over")
    calls, sends = len(model.requests_for(CHAT)), len(napcat.sent("send_group_msg"))
    ignored = await say(napcat, group, user, "喂，回我")
    await wait_for(lambda: suppressed(timeline, ignored), timeout=10, what="flagged")
    assert timeline.messages(ignored["message_id"])[0]["text"].endswith("喂，回我")
    await asyncio.sleep(0.5)  # a turn, had one started, would have called the model by now
    assert settled(timeline)
    assert len(model.requests_for(CHAT)) == calls
    assert len(napcat.sent("send_group_msg")) == sends


def settled(timeline: TimelineDb) -> bool:
    started = timeline.scalar("SELECT COUNT(*) FROM event WHERE kind = 'turn_started'")
    ended = timeline.scalar(
        "SELECT COUNT(*) FROM event WHERE kind IN "
        "('turn_finished', 'turn_failed', 'turn_waiting', 'turn_interrupted')"
    )
    return bool(started == ended)


async def test_when_the_private_message_fails_the_owner_gets_an_email(
    napcat: NapCat, timeline: TimelineDb, smtp: FakeSmtpServer
) -> None:
    napcat.failing.add("send_private_msg")
    await insult_until(napcat, timeline, OTHER_GROUP, RUDER, "silenced")
    await asyncio.sleep(SILENCE_S + 0.5)
    await insult_until(napcat, timeline, OTHER_GROUP, RUDER, "blacklisted")
    mails = await wait_for(lambda: smtp.messages, timeout=30, what="the e-mail")
    body = mails[0].get_body(preferencelist=("plain",))
    assert body is not None and str(RUDER) in body.get_content()
    assert mails[0]["To"] == "owner@example.invalid"


def _checked(timeline: TimelineDb) -> bool:
    rows = timeline.query("SELECT status FROM job WHERE kind = 'persona.notify_check'")
    return bool(rows) and all(row["status"] == "done" for row in rows)



async def private(napcat: NapCat, user: int, words: str, **extra: Any) -> None:
    before = len(napcat.sent("send_private_msg"))
    await napcat.send_event({**napcat.private_message(user, words), **extra})
    await wait_for(
        lambda: len(napcat.sent("send_private_msg")) > before, timeout=20, what="the answer"
    )


def system_of(model: FakeModelServer) -> str:
    return str(model.requests_for(CHAT)[-1].body["messages"][0]["content"])


async def test_its_own_voice_persona_mood_and_a_resumption_after_a_long_quiet(
    napcat: NapCat, model: FakeModelServer, timeline: TimelineDb
) -> None:
    napcat.failing.discard("send_private_msg")
    friend = 9401
    # The bot's own last words in this chat, three days ago (NapCat reports them as sent).
    said_then = napcat.private_message(friend, "晚安")
    said_then.update(
        post_type="message_sent",
        user_id=SELF_ID,
        target_id=friend,
        sender={"user_id": SELF_ID, "nickname": "牛牛", "card": ""},
        time=int(time.time()) - 3 * 24 * 3600,
    )
    await napcat.send_event(said_then)
    await wait_for(lambda: timeline.messages(said_then["message_id"]), timeout=10, what="stored")
    await private(napcat, friend, "好久不见")
    assert "你们上次聊天是3天前" in system_of(model)  # the hint, once
    assert "此刻：" in system_of(model)

    model.script(CHAT, reply("[心情:开心]好呀，最近挺好"))
    await private(napcat, friend, "最近怎么样")
    assert "上次聊天" not in system_of(model)
    await private(napcat, friend, "那就好")
    assert "心情不错" in system_of(model)  # the mood the last reply declared

    await private(napcat, OWNER, "/人设 风格 说话带点东北味，爱用“咋整”")
    await private(napcat, friend, "在吗")
    assert "说话风格：说话带点东北味" in system_of(model)


async def test_rage_switched_off_in_the_console_notices_nothing_until_switched_on(
    napcat: NapCat, timeline: TimelineDb, bot: BotProcess
) -> None:
    calm, group = 9501, 8103
    await put_settings(bot, TOKEN, "rage", {"enabled": False})
    try:
        for _ in range(3):  # enough to silence anyone were rage on (threshold 8, 4 each)
            event = await say(napcat, group, calm, "你是傻逼")
            await wait_for(lambda e=event: timeline.messages(e["message_id"]), what="stored")
        await wait_for(lambda: settled(timeline), what="the turns over")
        assert outcomes(timeline, calm) == []
        assert not suppressed(timeline, event)
    finally:
        await put_settings(bot, TOKEN, "rage", {"enabled": True})
    # Switched on again: the very next insult counts (the attack's event names its outcome).
    await say(napcat, group, calm, "你是傻逼")
    await wait_for(lambda: outcomes(timeline, calm), what="the attack noticed")
