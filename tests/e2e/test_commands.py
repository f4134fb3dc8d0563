"""End to end: owners and admins steer the bot from the chat, through the real bot process,
fake NapCat and the fake model server. An admin mutes the group and the next @ is not
answered until 说话 (or until the time runs out); a member's 关闭 is refused with the reason;
状态 reports the real counts; 为什么不理我 names the gate's rule for a dropped message."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from pallas.product.chat_commands.plain import REASONS
from tests.support.bot_process import BotProcess
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, at, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.model_bot import bot_with_model
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID = 46_901
GROUP = 8501
OWNER, ADMIN, MEMBER, SILENCED = 9701, 9702, 9703, 9704
HELP_GROUP = 8502  # a chat of its own: no earlier test's reply opened a window in it
CHAT = "e2e-commands"
TOKEN = "commands-console-token"


def reply(words: str) -> Reply:
    return Reply("", (ToolCallSpec("reply", json.dumps({"text": words}, ensure_ascii=False)),))


class NapCat(FakeNapCat):
    def __init__(self, ws_url: str) -> None:
        super().__init__(ws_url, SELF_ID, ACCESS_TOKEN)
        self.answer_sends()

    def said(self) -> list[str]:
        return [
            "".join(seg["data"].get("text", "") for seg in call["message"])
            for call in self.calls_to("send_group_msg")
        ]


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(default=reply("在呢")) as server:
        yield server


@pytest.fixture(scope="module")
async def bot(
    tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer
) -> AsyncIterator[BotProcess]:
    env = {
        "SUPERUSERS": f'["{OWNER}"]',
        "PALLAS_CONSOLE_TOKEN": TOKEN,
        "PALLAS_BLOCKED_USERS": f'["{SILENCED}"]',
    }
    async with bot_with_model(tmp_path_factory.mktemp("commands"), model, CHAT, env=env) as bot:
        yield bot


@pytest.fixture(scope="module")
async def napcat(bot: BotProcess) -> AsyncIterator[NapCat]:
    client = NapCat(bot.ws_url)
    await client.connect()
    yield client
    await client.close()


@pytest.fixture(scope="module")
def timeline(bot: BotProcess) -> TimelineDb:
    return TimelineDb(bot.db_path)


ROLES = {OWNER: "member", ADMIN: "admin", MEMBER: "member", SILENCED: "admin"}


async def send(
    napcat: NapCat, timeline: TimelineDb, user: int, *segments: Any, group: int = GROUP
) -> int:
    """Say something in the group; our id of the stored message."""
    event = napcat.group_message(group, user, list(segments))
    event["sender"]["role"] = ROLES[user]
    await napcat.send_event(event)
    await wait_for(lambda: timeline.messages(event["message_id"]), what="stored")
    return int(
        timeline.scalar(
            "SELECT id FROM message WHERE platform_message_id = ?", str(event["message_id"])
        )
    )


async def command(
    napcat: NapCat, timeline: TimelineDb, user: int, words: str, group: int = GROUP
) -> str:
    """Send a command and return the bot's answer to it: the outbox rows of the action that
    handled it, not whatever the bot says next (a model reply to an earlier line may be late)."""
    asked = await send(napcat, timeline, user, text(words), group=group)
    turn = await wait_for(
        lambda: timeline.scalar(
            "SELECT turn_id FROM event WHERE message_id = ? AND kind = 'stage_handled'", asked
        ),
        what=f"{words} handled",
    )
    rows = "SELECT status, payload FROM outbox WHERE turn_id = ? ORDER BY id"
    await wait_for(
        lambda: (found := timeline.query(rows, turn)) and all(r["status"] == "sent" for r in found),
        what=f"the answer to {words} sent",
    )
    return "\n".join(json.loads(r["payload"])["text"] for r in timeline.query(rows, turn))


def answered_by_model(timeline: TimelineDb, message_id: int) -> bool:
    """The turn that took this line has had its answer sent."""
    turn = timeline.scalar("SELECT turn_id FROM message WHERE id = ?", message_id)
    sent = "SELECT COUNT(*) FROM outbox WHERE turn_id = ? AND status = 'sent'"
    return turn is not None and bool(timeline.scalar(sent, turn))


async def put_gate(
    bot: BotProcess, timeline: TimelineDb, changes: dict[str, Any], group: int = GROUP
) -> dict[str, Any]:
    """Change the group's gate knobs through the console; the values they had before."""
    sid = timeline.scalar("SELECT id FROM stream WHERE external_id = ?", str(group))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=bot.http_url, headers=headers) as http:
        before = (await http.get(f"/pallas/api/settings/gate/{sid}")).json()
        changed = await http.put(f"/pallas/api/settings/gate/{sid}", json=changes)
    assert changed.status_code == 200, changed.text
    values = {field["name"]: field["value"] for field in before["fields"]}
    return {key: values[key] for key in changes}


def decision(timeline: TimelineDb, message_id: int) -> str | None:
    row = timeline.query(
        "SELECT kind, reason FROM event WHERE message_id = ? AND kind IN "
        "('gate_dropped', 'gate_passed') ORDER BY id DESC LIMIT 1",
        message_id,
    )
    return f"{row[0]['kind']}:{row[0]['reason']}" if row else None


async def test_an_admin_mutes_the_group_and_the_next_at_waits_until_unmuted(
    napcat: NapCat, timeline: TimelineDb, model: FakeModelServer
) -> None:
    answer = await command(napcat, timeline, ADMIN, "/安静 10 分钟")
    assert answer.startswith("好，我安静 10 分钟")
    calls = len(model.requests_for(CHAT))
    muted = await send(napcat, timeline, MEMBER, at(SELF_ID), text(" 在吗"))
    await wait_for(lambda: decision(timeline, muted), what="the gate")
    assert decision(timeline, muted) == "gate_dropped:muted"
    await asyncio.sleep(0.5)
    assert len(model.requests_for(CHAT)) == calls  # not even an @ reaches the model

    assert (await command(napcat, timeline, ADMIN, "/说话")).startswith("好，我又可以说话了")
    answered = await send(napcat, timeline, MEMBER, at(SELF_ID), text(" 现在呢"))
    await wait_for(lambda: answered_by_model(timeline, answered), what="the answer")
    assert decision(timeline, answered) == "gate_passed:mentioned"


async def test_a_mute_ends_when_its_time_runs_out(
    napcat: NapCat, timeline: TimelineDb, bot: BotProcess
) -> None:
    end = datetime.now(UTC) + timedelta(seconds=8)
    await put_gate(bot, timeline, {"muted_until": end.isoformat()})  # the knob 安静 sets
    early = await send(napcat, timeline, MEMBER, at(SELF_ID), text(" 还安静吗"))
    await wait_for(lambda: decision(timeline, early), what="the gate")
    assert decision(timeline, early) == "gate_dropped:muted"
    await asyncio.sleep(max(0.0, (end - datetime.now(UTC)).total_seconds()) + 0.5)
    late = await send(napcat, timeline, MEMBER, at(SELF_ID), text(" 时间到了吧"))
    await wait_for(lambda: decision(timeline, late), what="the gate")
    assert decision(timeline, late) == "gate_passed:mentioned"
    # Its answer is awaited here, so that no later test takes it for the answer to its own line.
    await wait_for(lambda: answered_by_model(timeline, late), what="the answer after the mute")


async def test_a_members_switch_is_refused_with_the_reason_and_an_admins_is_not(
    napcat: NapCat, timeline: TimelineDb
) -> None:
    refused = await command(napcat, timeline, MEMBER, "/关闭 复读")
    assert refused == "/关闭 只有群主和管理员能用。"
    assert (await command(napcat, timeline, ADMIN, "/关闭 复读")) == "好，这个群的「复读」关了。"
    assert (await command(napcat, timeline, ADMIN, "/关闭 飞行")).startswith("没有「飞行」这个功能")
    status = await command(napcat, timeline, MEMBER, "/状态")
    assert "复读" in status.split("关着：")[1].splitlines()[0]
    assert (await command(napcat, timeline, OWNER, "/开启 复读")) == "好，这个群的「复读」开了。"


async def test_status_reports_the_real_counts(
    napcat: NapCat, timeline: TimelineDb, model: FakeModelServer
) -> None:
    asked = await send(napcat, timeline, MEMBER, at(SELF_ID), text(" 数数看"))
    await wait_for(lambda: answered_by_model(timeline, asked), what="the answer")
    sid = timeline.scalar("SELECT id FROM stream WHERE external_id = ?", str(GROUP))
    calls = timeline.scalar("SELECT COUNT(*) FROM llm_call WHERE stream_id = ?", sid)
    assert calls and calls >= 1
    status = await command(napcat, timeline, MEMBER, "/状态")
    assert f"今天在这里调用模型 {calls} 次" in status
    assert "最近的决定：" in status and "开着：模型聊天" in status


async def test_why_not_me_names_the_gates_rule(
    napcat: NapCat, timeline: TimelineDb, bot: BotProcess
) -> None:
    # Nobody called the bot, and no window after its own lines lets the talk in: the gate's
    # rule is then the attention filter, whatever this module said before.
    quiet = {"natural_window_s": 0, "follow_up_window_s": 0, "ongoing_exchange_s": 0,
             "ambient_probability": 0}  # fmt: skip
    defaults = await put_gate(bot, timeline, quiet)
    try:
        ignored = await send(napcat, timeline, MEMBER, text("今天好热啊"))
        await wait_for(lambda: decision(timeline, ignored), what="the gate")
        kind, rule = str(decision(timeline, ignored)).split(":")
        assert kind == "gate_dropped" and rule in ("attention_filtered", "frequency_cap")
        answer = await command(napcat, timeline, MEMBER, "/为什么不理我")
        assert "今天好热啊" in answer and REASONS[rule] in answer
    finally:
        await put_gate(bot, timeline, defaults)


async def test_commands_are_stored_and_never_start_a_turn(
    napcat: NapCat, timeline: TimelineDb
) -> None:
    asked = await send(napcat, timeline, MEMBER, text("／帮助"))  # a full-width slash
    await wait_for(
        lambda: timeline.scalar(
            "SELECT COUNT(*) FROM event WHERE message_id = ? AND kind = 'stage_handled'", asked
        ),
        what="handled",
    )
    turns = timeline.scalar(
        "SELECT COUNT(*) FROM message WHERE id = ? AND turn_id IS NOT NULL", asked
    )
    assert turns == 0
    reason = timeline.scalar(
        "SELECT reason FROM event WHERE message_id = ? AND kind = 'stage_handled'", asked
    )
    assert reason == "command_help"
    # The answer joins the history too, once NapCat confirmed it.
    await wait_for(
        lambda: timeline.scalar(
            "SELECT COUNT(*) FROM message WHERE from_bot = 1 AND text LIKE '你能用的命令%'"
        ),
        what="the answer in the timeline",
    )


async def test_a_silenced_persons_command_does_nothing(
    napcat: NapCat, timeline: TimelineDb
) -> None:
    before = len(napcat.said())
    asked = await send(napcat, timeline, SILENCED, text("/关闭 模型聊天"))  # an admin, but silenced
    await wait_for(
        lambda: timeline.scalar("SELECT suppressed FROM message WHERE id = ?", asked),
        what="flagged",
    )
    await asyncio.sleep(0.5)  # an answer, had one been queued, would be sent by now
    assert len(napcat.said()) == before
    handled = timeline.scalar(
        "SELECT COUNT(*) FROM event WHERE message_id = ? AND kind = 'stage_handled'", asked
    )
    assert handled == 0
    status = await command(napcat, timeline, MEMBER, "/状态")
    assert "开着：模型聊天" in status  # the switch was not touched


async def test_a_commands_answer_does_not_invite_the_talk_after_it_and_a_reply_does(
    bot: BotProcess, napcat: NapCat, timeline: TimelineDb, model: FakeModelServer
) -> None:
    """docs/gating.md, the natural window: only the bot taking part in the talk opens it."""
    group = HELP_GROUP
    assert "/帮助" in await command(napcat, timeline, MEMBER, "/帮助", group)
    # No lottery and no public questions: only the natural window could let a line in.
    await put_gate(bot, timeline, {"ambient_probability": 0, "answer_public_questions": False},
                   group)  # fmt: skip
    lines = [f"第{n}句闲聊，和机器人无关" for n in range(10)]
    ids = [await send(napcat, timeline, (ADMIN, MEMBER)[n % 2], text(line), group=group)
           for n, line in enumerate(lines)]  # fmt: skip
    await wait_for(lambda: all(decision(timeline, i) for i in ids), what="ten gate decisions")
    assert {decision(timeline, i) for i in ids} == {"gate_dropped:attention_filtered"}
    asked = [json.dumps(r.body, ensure_ascii=False) for r in model.requests]
    assert not any(line in body for line in lines for body in asked)
    origin = "SELECT origin FROM message WHERE from_bot AND stream_id = ? ORDER BY id DESC"
    sid = timeline.scalar("SELECT id FROM stream WHERE external_id = ?", str(group))
    assert timeline.scalar(origin, sid) == "command"

    called = await send(napcat, timeline, MEMBER, at(SELF_ID), text("在吗"), group=group)
    await wait_for(lambda: answered_by_model(timeline, called), what="the model's reply")
    assert timeline.scalar(origin, sid) == "agent_reply"
    after = await send(napcat, timeline, ADMIN, text("原来它在"), group=group)
    await wait_for(lambda: decision(timeline, after), what="the gate")
    assert decision(timeline, after) == "gate_passed:attention"
    signals = timeline.scalar(
        "SELECT payload FROM event WHERE message_id = ? AND kind = 'gate_passed'", after
    )
    assert "natural_window" in json.loads(signals)["signals"]
