"""End to end: durable delivery through the outbox, across NapCat outages and real crashes.

The real bot process, a fake NapCat over a real WebSocket and the fake model over real HTTP.
Each test: an @ in a group, the model answers with a `reply` (two bubbles), and something goes
wrong on the way out: NapCat refuses a send, drops the connection, or the process is killed
(SIGKILL) before or during a send and started again on the same data dir. What is checked:
NapCat's calls (every attempt, and the sends it confirmed with a message id) and the bot's
database (outbox rows, the reply record, the ledger's delivery events, the bot's own messages).

The one duplicate the design allows (docs/delivery.md): a send cut off by a crash, never
reported back by NapCat, is sent again after a quick restart. Nothing else is ever sent twice.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.bot_process import BotProcess
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, at, next_message_id, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID = 46_101
GROUP = 7801
USER = 5601
MODEL = "e2e-delivery"
SEND = "send_group_msg"
DELIVERY_EVENTS = ("delivered", "delivery_retry", "delivery_failed", "delivery_recovered")
SLOW = 30.0  # generous: pauses between bubbles are ~1 s, a retry waits 2 s, a start ~2-3 s


class NapCat(FakeNapCat):
    """Confirms sends with fresh message ids and remembers which ones it confirmed."""

    def __init__(self, ws_url: str) -> None:
        super().__init__(ws_url, SELF_ID, ACCESS_TOKEN)
        self.confirmed: list[str] = []  # texts answered with a message id, in order
        self.responders[SEND] = self._sent

    def _sent(self, params: dict[str, Any]) -> dict[str, int]:
        self.confirmed.append(_text_of(params))
        return {"message_id": next_message_id()}

    def attempted(self) -> list[str]:
        """Every send received, refused and unanswered ones included."""
        return [_text_of(params) for params in self.calls_to(SEND)]


@dataclass
class Scene:
    bot: BotProcess
    model: FakeModelServer
    timeline: TimelineDb
    napcats: list[NapCat] = field(default_factory=list)

    async def connect(self) -> NapCat:
        napcat = NapCat(self.bot.ws_url)
        self.napcats.append(napcat)
        await napcat.connect()
        return napcat

    def confirmed(self) -> list[str]:
        return [sent for napcat in self.napcats for sent in napcat.confirmed]

    def attempted(self) -> list[str]:
        return [sent for napcat in self.napcats for sent in napcat.attempted()]

    async def ask(self, napcat: NapCat, answer: str, delay_s: float = 0.0) -> dict[str, Any]:
        """The model will answer `answer` with the reply tool; NapCat sends an @ to trigger it."""
        arguments = json.dumps({"text": answer}, ensure_ascii=False)
        self.model.script(MODEL, Reply("", (ToolCallSpec("reply", arguments),), delay_s=delay_s))
        event = napcat.group_message(GROUP, USER, [at(SELF_ID), text(" 在吗")])
        await napcat.send_event(event)
        return event

    async def crash_and_restart(self) -> None:
        """SIGKILL (no shutdown hook), then the same bot on the same data dir and port."""
        self.bot.kill()
        for napcat in self.napcats:
            await napcat.close()
        self.bot.start()
        await self.bot.wait_ready()

    async def wait_disconnected(self) -> None:
        for _ in range(200):
            if str(SELF_ID) not in (await self.bot.health())["bots"]:
                return
            await asyncio.sleep(0.05)
        raise AssertionError("the bot still sees NapCat connected")


@pytest.fixture
async def scene(tmp_path: Path) -> AsyncIterator[Scene]:
    async with FakeModelServer() as model:
        env = {"LLM_BASE_URL": model.base_url, "LLM_MODEL": MODEL, "LLM_API_KEY": "sk-e2e"}
        bot = BotProcess(tmp_path, token=ACCESS_TOKEN, env=env)
        bot.start()
        current = Scene(bot, model, TimelineDb(bot.db_path))
        try:
            await bot.wait_ready()
            yield current
        finally:
            for napcat in current.napcats:
                await napcat.close()
            bot.stop()


async def test_a_refused_send_is_retried_and_delivered_once(scene: Scene) -> None:
    napcat = await scene.connect()
    napcat.refusals[SEND] = 1  # NapCat answers the first send with retcode 1200, then normally
    event = await scene.ask(napcat, "稍等\n我看看")
    turn_id = await _reply_committed(scene.timeline, event, ["稍等", "我看看"])

    await wait_for(lambda: scene.confirmed() == ["稍等", "我看看"], SLOW, "both bubbles sent")
    # The refused bubble went again after its backoff, and the second one waited for it.
    assert napcat.attempted() == ["稍等", "稍等", "我看看"]
    first, second = await _settled(scene, turn_id, ["稍等", "我看看"])
    assert (first["attempts"], second["attempts"]) == (1, 0)
    [retry] = scene.timeline.events("delivery_retry")
    assert (retry["reason"], _payload(retry)) == (
        "message",
        {"outbox_id": first["id"], "attempts": 1},
    )
    delivered = scene.timeline.events("delivered")
    assert [_payload(e)["outbox_id"] for e in delivered] == [first["id"], second["id"]]
    assert retry["id"] < delivered[0]["id"]


async def test_rows_wait_out_a_disconnect_and_go_to_the_next_connection(scene: Scene) -> None:
    away = await scene.connect()
    # The model takes 1.5 s: NapCat is gone by the time the reply is decided.
    event = await scene.ask(away, "回来了\n刚才掉线了", delay_s=1.5)
    await wait_for(lambda: scene.timeline.messages(event["message_id"]), what="the @ stored")
    await away.close()
    await scene.wait_disconnected()
    turn_id = await _reply_committed(scene.timeline, event, ["回来了", "刚才掉线了"])
    assert _open_rows(scene.timeline) == [("pending", 0), ("pending", 0)]
    # The dispatcher looks again every second: give it a look while NapCat is still away, so a
    # send attempted without a connection would show (as a retry, attempts 1) below.
    await asyncio.sleep(1.5)
    assert _open_rows(scene.timeline) == [("pending", 0), ("pending", 0)]

    back = await scene.connect()  # a new connection of the same account
    await wait_for(lambda: back.confirmed == ["回来了", "刚才掉线了"], SLOW, "sent after reconnect")
    assert away.attempted() == []
    assert back.attempted() == ["回来了", "刚才掉线了"]
    rows = await _settled(scene, turn_id, ["回来了", "刚才掉线了"])
    assert [row["attempts"] for row in rows] == [0, 0]
    assert scene.timeline.events("delivery_retry") == []
    assert "is not connected, nothing done" not in scene.bot.log()


async def test_pending_rows_survive_a_crash_and_are_sent_once_after_restart(scene: Scene) -> None:
    away = await scene.connect()
    event = await scene.ask(away, "重启好了\n接着聊", delay_s=1.5)
    await wait_for(lambda: scene.timeline.messages(event["message_id"]), what="the @ stored")
    await away.close()
    await scene.wait_disconnected()
    turn_id = await _reply_committed(scene.timeline, event, ["重启好了", "接着聊"])
    assert _open_rows(scene.timeline) == [("pending", 0), ("pending", 0)]

    await scene.crash_and_restart()
    assert _open_rows(scene.timeline) == [("pending", 0), ("pending", 0)]
    back = await scene.connect()
    await wait_for(lambda: back.confirmed == ["重启好了", "接着聊"], SLOW, "sent after restart")
    assert scene.attempted() == ["重启好了", "接着聊"]
    await _settled(scene, turn_id, ["重启好了", "接着聊"])
    # Nothing was mid-send at the crash, and the turn was not decided a second time.
    assert scene.timeline.events("delivery_recovered") == []
    assert len(scene.model.requests_for(MODEL)) == 1


async def test_an_unreported_interrupted_send_is_sent_again_after_a_quick_restart(
    scene: Scene,
) -> None:
    napcat = await scene.connect()
    napcat.unanswered.add(SEND)  # NapCat takes the send and never answers it
    event = await scene.ask(napcat, "这句可能发过\n这句还没发")
    turn_id = await _reply_committed(scene.timeline, event, ["这句可能发过", "这句还没发"])
    await _first_row_sending(scene, napcat, "这句可能发过")

    await scene.crash_and_restart()
    # No echo, and NapCat is not back yet: the row waits for the only witness left.
    assert scene.timeline.events("delivery_recovered") == []
    assert _open_rows(scene.timeline) == [("sending", 0), ("pending", 0)]

    back = await scene.connect()  # this NapCat cannot read its history: the old bound decides
    [recovered] = await wait_for(
        lambda: scene.timeline.events("delivery_recovered"), SLOW, "recovery once connected"
    )
    first, second = _outbox(scene.timeline)
    assert recovered["reason"] == "resend"
    assert _payload(recovered) == {"outbox_id": first["id"], "echo": None, "history": "unreadable"}
    await wait_for(lambda: back.confirmed == ["这句可能发过", "这句还没发"], SLOW, "resent")
    # The documented duplicate: the first bubble reached NapCat twice, confirmed once.
    assert scene.attempted() == ["这句可能发过", "这句可能发过", "这句还没发"]
    assert back.attempted() == ["这句可能发过", "这句还没发"]
    await _settled(scene, turn_id, ["这句可能发过", "这句还没发"])
    delivered = scene.timeline.events("delivered")
    assert [_payload(e)["outbox_id"] for e in delivered] == [first["id"], second["id"]]
    assert recovered["id"] < delivered[0]["id"]
    assert len(scene.model.requests_for(MODEL)) == 1


async def test_a_reported_interrupted_send_is_confirmed_and_not_sent_again(scene: Scene) -> None:
    napcat = await scene.connect()
    napcat.unanswered.add(SEND)
    event = await scene.ask(napcat, "这句已经发出\n接着说下一句")
    turn_id = await _reply_committed(scene.timeline, event, ["这句已经发出", "接着说下一句"])
    await _first_row_sending(scene, napcat, "这句已经发出")
    # NapCat reports the bot's own message (its message_sent echo) but never answers the call.
    echo = napcat.group_message(GROUP, SELF_ID, "这句已经发出", post_type="message_sent")
    await napcat.send_event(echo)
    await wait_for(
        lambda: scene.timeline.query(
            "SELECT 1 FROM message WHERE from_bot = 1 AND platform_message_id = ?",
            str(echo["message_id"]),
        ),
        what="the echo stored as the bot's message",
    )

    await scene.crash_and_restart()
    [recovered] = await wait_for(
        lambda: scene.timeline.events("delivery_recovered"), SLOW, "start-up recovery"
    )
    first, second = _outbox(scene.timeline)
    assert recovered["reason"] == "confirmed"
    assert _payload(recovered) == {
        "outbox_id": first["id"],
        "echo": str(echo["message_id"]),
        "history": "not_asked",
    }
    assert (first["status"], first["platform_message_id"]) == ("sent", str(echo["message_id"]))

    back = await scene.connect()
    await wait_for(lambda: back.confirmed == ["接着说下一句"], SLOW, "the second bubble sent")
    assert back.attempted() == ["接着说下一句"]  # the confirmed bubble never went again
    assert scene.attempted() == ["这句已经发出", "接着说下一句"]
    await _settled(scene, turn_id, ["这句已经发出", "接着说下一句"], echoed=1)
    [delivered] = scene.timeline.events("delivered")
    assert _payload(delivered)["outbox_id"] == second["id"]
    assert len(scene.model.requests_for(MODEL)) == 1


async def test_a_send_whose_receipt_and_echo_died_with_the_process_is_found_in_history(
    scene: Scene,
) -> None:
    napcat = await scene.connect()
    napcat.unanswered.add(SEND)  # NapCat sends it; the receipt and the echo die with the bot
    event = await scene.ask(napcat, "这句其实发出去了\n后面这句")
    turn_id = await _reply_committed(scene.timeline, event, ["这句其实发出去了", "后面这句"])
    await _first_row_sending(scene, napcat, "这句其实发出去了")

    await scene.crash_and_restart()
    sent_id = next_message_id()
    back = NapCat(scene.bot.ws_url)
    back.responders["get_group_msg_history"] = lambda params: {
        "messages": [_history_message(int(params["group_id"]), "这句其实发出去了", sent_id)]
    }
    scene.napcats.append(back)
    await back.connect()
    [recovered] = await wait_for(
        lambda: scene.timeline.events("delivery_recovered"), SLOW, "recovery once connected"
    )
    first, _second = _outbox(scene.timeline)
    assert recovered["reason"] == "confirmed"
    assert _payload(recovered) == {"outbox_id": first["id"], "echo": None, "history": "found"}
    await wait_for(lambda: back.confirmed == ["后面这句"], SLOW, "the second bubble sent")
    assert scene.attempted() == ["这句其实发出去了", "后面这句"]  # never sent twice
    # What the history showed is now the bot's message in the timeline.
    assert scene.timeline.messages(sent_id)[0]["from_bot"] == 1
    await _settled(scene, turn_id, ["这句其实发出去了", "后面这句"], echoed=1)


def _history_message(group_id: int, said: str, message_id: int) -> dict[str, Any]:
    """One entry of NapCat's get_group_msg_history answer: the bot's own message."""
    return {
        "self_id": SELF_ID,
        "user_id": SELF_ID,
        "time": int(time.time()),
        "message_id": message_id,
        "message_type": "group",
        "group_id": group_id,
        "sender": {"user_id": SELF_ID, "nickname": "bot", "card": ""},
        "message": [{"type": "text", "data": {"text": said}}],
        "post_type": "message_sent",
    }


# ----- helpers ---------------------------------------------------------------------------------


def _text_of(params: dict[str, Any]) -> str:
    return "".join(
        seg["data"].get("text", "") for seg in params["message"] if seg["type"] == "text"
    )


def _payload(row: Any) -> dict[str, Any]:
    return json.loads(row["payload"])


def _outbox(timeline: TimelineDb) -> list[Any]:
    return timeline.query("SELECT * FROM outbox ORDER BY id")


def _open_rows(timeline: TimelineDb) -> list[tuple[str, int]]:
    return [(row["status"], row["attempts"]) for row in _outbox(timeline)]


async def _reply_committed(timeline: TimelineDb, event: dict[str, Any], bubbles: list[str]) -> int:
    """The turn that took the @ and decided to reply, once its reply is committed."""

    def queued() -> int | None:
        turn_id = timeline.scalar(
            "SELECT turn_id FROM message WHERE platform_message_id = ?", str(event["message_id"])
        )
        if turn_id is None:
            return None
        rows = timeline.query(
            "SELECT * FROM event WHERE kind = 'reply_queued' AND turn_id = ?", turn_id
        )
        return turn_id if rows else None

    turn_id = await wait_for(queued, SLOW, "the reply committed")
    [decided] = timeline.query(
        "SELECT reason FROM event WHERE kind = 'agent_decided' AND turn_id = ?", turn_id
    )
    assert decided["reason"] == "reply"
    [queued_event] = timeline.query(
        "SELECT payload FROM event WHERE kind = 'reply_queued' AND turn_id = ?", turn_id
    )
    assert _payload(queued_event)["bubbles"] == bubbles
    assert [_payload(row)["text"] for row in _outbox(timeline)] == bubbles
    return turn_id


async def _first_row_sending(scene: Scene, napcat: NapCat, bubble: str) -> None:
    """NapCat holds the first bubble's send, and the bot has it committed as `sending`."""
    await wait_for(lambda: napcat.attempted() == [bubble], SLOW, "the first send received")
    await wait_for(
        lambda: _open_rows(scene.timeline) == [("sending", 0), ("pending", 0)],
        SLOW,
        "the first row marked sending",
    )


async def _settled(scene: Scene, turn_id: int, bubbles: list[str], *, echoed: int = 0) -> list[Any]:
    """Every bubble sent exactly once, in order, every fact tied to the deciding turn.

    `echoed`: how many leading bubbles were confirmed at start-up from NapCat's echo
    rather than sent (and so were not confirmed by a send in this test).
    """
    timeline = scene.timeline
    await wait_for(
        lambda: all(status == "sent" for status, _ in _open_rows(timeline)), SLOW, "all rows sent"
    )
    rows = _outbox(timeline)
    assert [_payload(row)["text"] for row in rows] == bubbles
    assert all(row["turn_id"] == turn_id for row in rows)
    platform_ids = [row["platform_message_id"] for row in rows]
    assert all(platform_ids) and len(set(platform_ids)) == len(platform_ids)
    [reply] = timeline.query("SELECT * FROM reply")
    assert (reply["turn_id"], json.loads(reply["bubbles"])) == (turn_id, bubbles)
    assert all(row["reply_id"] == reply["id"] for row in rows)

    # NapCat confirmed each bubble once, in order (across every connection of the test).
    assert scene.confirmed() == bubbles[echoed:]
    # Every delivery event belongs to the turn that decided the reply.
    await wait_for(
        lambda: len(timeline.events("delivered")) == len(bubbles) - echoed,
        SLOW,
        "the delivered events",
    )
    delivered = timeline.events("delivered")
    for kind in DELIVERY_EVENTS:
        assert all(e["turn_id"] == turn_id for e in timeline.events(kind)), kind
    by_row = {row["id"]: row["platform_message_id"] for row in rows}
    assert [_payload(e)["outbox_id"] for e in delivered] == [row["id"] for row in rows[echoed:]]
    assert all(
        by_row[_payload(e)["outbox_id"]] == _payload(e)["platform_message_id"] for e in delivered
    )
    assert timeline.events("delivery_failed") == []

    # The bot's own messages in the timeline: each bubble once, under its platform id.
    own = timeline.query(
        "SELECT text, platform_message_id FROM message WHERE from_bot = 1 ORDER BY id"
    )
    assert sorted((m["text"], m["platform_message_id"]) for m in own) == sorted(
        zip(bubbles, platform_ids, strict=True)
    )
    assert "Traceback" not in scene.bot.log()
    return rows
