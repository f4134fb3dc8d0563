"""End to end: the conversation core in the real bot process, across a real crash (SIGKILL).

What the deterministic responders send goes through the same durable outbox as the agent's
replies: a repeat and a welcome committed before the crash are delivered exactly once after
it. The fake NapCat is a real WebSocket client; the database is the bot's own SQLite file.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pallas.store.audit_trail import explain
from pallas.store.engine import create_engine
from tests.support.bot_process import REPO_ROOT, BotProcess
from tests.support.fake_napcat import FakeNapCat, next_message_id
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID = 46_301
GROUP = 7901
SEND = "send_group_msg"
SLOW = 30.0


class NapCat(FakeNapCat):
    """Confirms sends with fresh ids; its history of the bot's messages is empty."""

    def __init__(self, ws_url: str) -> None:
        super().__init__(ws_url, SELF_ID, ACCESS_TOKEN)
        self.confirmed: list[list[dict[str, Any]]] = []
        self.responders[SEND] = self._sent
        self.responders["get_stranger_info"] = lambda p: {"nickname": f"u{p['user_id']}"}
        self.responders["get_group_msg_history"] = lambda p: {"messages": []}

    def _sent(self, params: dict[str, Any]) -> dict[str, int]:
        self.confirmed.append(params["message"])
        return {"message_id": next_message_id()}


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotProcess]:
    process = BotProcess(tmp_path, token=ACCESS_TOKEN)
    process.data_dir.mkdir(parents=True)
    notices = {str(GROUP): {"welcome": "欢迎 {at}"}}
    (process.data_dir / "notices.json").write_text(json.dumps(notices), encoding="utf-8")
    process.start()
    try:
        await process.wait_ready()
        yield process
    finally:
        process.stop()


async def restart(bot: BotProcess, *napcats: FakeNapCat) -> None:
    bot.kill()  # SIGKILL: no shutdown hook runs
    for napcat in napcats:
        await napcat.close()
    bot.start()
    await bot.wait_ready()


def outbox(timeline: TimelineDb) -> list[tuple[str, str, str]]:
    rows = timeline.query("SELECT status, idempotency_key, payload FROM outbox ORDER BY id")
    return [(r["status"], r["idempotency_key"], json.loads(r["payload"])["text"]) for r in rows]


def welcomes(timeline: TimelineDb) -> list[Any]:
    return [e for e in timeline.events("stage_acted") if e["reason"] == "welcome"]


async def test_a_repeat_and_a_welcome_cut_off_by_a_crash_go_out_exactly_once(
    bot: BotProcess,
) -> None:
    timeline = TimelineDb(bot.db_path)
    first = NapCat(bot.ws_url)
    first.unanswered.add(SEND)  # takes the send, never confirms it; then the bot dies
    await first.connect()
    for user in (501, 502):
        event = first.group_message(GROUP, user, "来了来了")
        await first.send_event(event)
        await wait_for(lambda e=event: timeline.messages(e["message_id"]), SLOW, "stored")
    # The repeat is decided after the second line is committed: queued before the join
    # arrives, so that the welcome queues behind it.
    await wait_for(lambda: outbox(timeline), SLOW, "the repeat queued")
    await first.send_event(first.member_change(GROUP, 503, joined=True))
    await wait_for(
        lambda: [s for s, _, _ in outbox(timeline)] == ["sending", "pending"],
        SLOW,
        "the repeat mid-send and the welcome queued behind it",
    )
    assert [text for _, _, text in outbox(timeline)] == ["来了来了", "欢迎 @u503"]
    # The stages' audit events are committed a moment after their rows: the crash comes
    # once they are, so that the decisions can be read back after it.
    await wait_for(lambda: timeline.events("stage_handled"), SLOW, "the repeat's decision")
    await wait_for(lambda: welcomes(timeline), SLOW, "the welcome's decision")

    await restart(bot, first)
    second = NapCat(bot.ws_url)
    await second.connect()
    await wait_for(lambda: len(second.confirmed) == 2, SLOW, "both sent after the restart")
    assert second.confirmed == [
        [{"type": "text", "data": {"text": "来了来了"}}],
        [{"type": "text", "data": {"text": "欢迎 "}}, {"type": "at", "data": {"qq": "503"}}],
    ]
    await wait_for(
        lambda: [s for s, _, _ in outbox(timeline)] == ["sent", "sent"], SLOW, "both settled"
    )
    assert first.confirmed == []  # the first connection never confirmed anything
    # What follows a row's `sent` (the bot's own line, the audit events) commits just after.
    own_lines = "SELECT text FROM message WHERE from_bot = 1 ORDER BY id"
    await wait_for(lambda: len(timeline.query(own_lines)) >= 2, SLOW, "the bot's own lines")
    await wait_for(lambda: len(timeline.events("delivered")) >= 2, SLOW, "both delivered")
    await wait_for(lambda: timeline.events("delivery_recovered"), SLOW, "the recovery")
    own = timeline.query(own_lines)
    assert [row["text"] for row in own] == ["来了来了", "欢迎 @u503"]
    [recovered] = timeline.events("delivery_recovered")
    assert recovered["reason"] == "resend"
    # Each was decided once, under an action id its outbox row carries.
    [handled] = timeline.events("stage_handled")
    [welcomed] = welcomes(timeline)
    turns = timeline.query("SELECT turn_id FROM outbox ORDER BY id")
    assert [row["turn_id"] for row in turns] == [handled["turn_id"], welcomed["turn_id"]]
    # Once the bot is back the history is checked too: still exactly one of each.
    assert len(second.calls_to(SEND)) == 2
    # The audit trail read back: the repeated line names the stage, the action and its row.
    engine = create_engine(f"sqlite+aiosqlite:///{bot.db_path}")
    try:
        path = await explain(engine, handled["message_id"])
    finally:
        await engine.dispose()
    assert path is not None
    assert path.kinds() == ["inbound", "stage_handled", "delivery_recovered", "delivered"]
    [action] = path.actions
    assert [(row.kind, row.status) for row in action.outbox] == [("message", "sent")]


async def test_a_silenced_members_line_reaches_no_other_plugin(tmp_path: Path) -> None:
    log = tmp_path / "listener.log"
    env = {
        "PALLAS_BLOCKED_USERS": '["604"]',
        "PALLAS_E2E_PLUGINS": "tests.support.listener_plugin",
        "PALLAS_E2E_LISTENER_LOG": str(log),
    }
    bot = BotProcess(
        tmp_path / "bot",
        token=ACCESS_TOKEN,
        env=env,
        script=REPO_ROOT / "tests" / "support" / "bot_with_plugins.py",
    )
    bot.start()
    napcat = NapCat(bot.ws_url)
    try:
        await bot.wait_ready()
        await napcat.connect()
        timeline = TimelineDb(bot.db_path)
        for user, said in ((604, "我被屏蔽了"), (605, "我没有")):
            event = napcat.group_message(GROUP, user, said)
            await napcat.send_event(event)
            await wait_for(lambda e=event: timeline.messages(e["message_id"]), what="stored")
        await wait_for(lambda: log.exists() and "605 我没有" in log.read_text(), what="listener")
        assert log.read_text(encoding="utf-8").splitlines() == ["605 我没有"]
        [flagged] = timeline.query("SELECT text FROM message WHERE suppressed = 1")
        assert flagged["text"] == "我被屏蔽了"
    finally:
        await napcat.close()
        bot.stop()
