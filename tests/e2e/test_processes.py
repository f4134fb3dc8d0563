"""End to end: two bot processes on one PostgreSQL store (docs/scaling.md).

Account A's NapCat connects to both processes (NapCat can serve several reverse-WebSocket
URLs), account B's to the second only; A and B share a group and each has one of its own.
A burst of calls runs while the first process is killed with -9, its sends through A still
unanswered. Nothing may be lost or doubled: every call is answered once, and what the dead
process left (its turns, the messages it stored, its rows in flight) is finished by the other
once the dead one's lease has expired, its rows confirmed from A's message history rather
than sent again.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.engine import create_engine
from tests.support.bot_process import BotProcess
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, at, next_message_id, text
from tests.support.fixtures import ACCESS_TOKEN

A, B = 53001, 53002
SHARED, ONLY_A, ONLY_B = 9301, 9302, 9303
FRIEND_A, FRIEND_B = 2001, 2002
MODEL = "processes-chat"
LEASE_S = 3
ROUNDS = 6
KILLED_AFTER = 3  # rounds sent while both processes run
_seqs = itertools.count(70_000)


class QQAccount:
    """One QQ account as QQ keeps it: what it sent through any of its NapCat connections,
    and the message history NapCat reads back from that."""

    def __init__(self, self_id: int) -> None:
        self.self_id = self_id
        self.connections: list[FakeNapCat] = []

    def connect_to(self, bot: BotProcess, *, answers_sends: bool = True) -> FakeNapCat:
        napcat = FakeNapCat(bot.ws_url, self.self_id, ACCESS_TOKEN)
        napcat.responders["send_group_msg"] = lambda _p: {"message_id": next_message_id()}
        napcat.responders["send_private_msg"] = lambda _p: {"message_id": next_message_id()}
        napcat.responders["get_group_msg_history"] = self._history("group_id", "send_group_msg")
        napcat.responders["get_friend_msg_history"] = self._history(
            "user_id", "send_private_msg"
        )
        napcat.responders["get_stranger_info"] = lambda p: {"nickname": f"u{p['user_id']}"}
        if not answers_sends:  # QQ takes the message, the receipt never comes back
            napcat.unanswered |= {"send_group_msg", "send_private_msg"}
        self.connections.append(napcat)
        return napcat

    def sent(self) -> list[tuple[FakeNapCat, dict[str, Any]]]:
        return [
            (napcat, params)
            for napcat in self.connections
            for action in ("send_group_msg", "send_private_msg")
            for params in napcat.calls_to(action)
        ]

    def texts(self) -> list[str]:
        return [_plain(params.get("message")) for _, params in self.sent()]

    def _history(self, key: str, action: str) -> Callable[[dict[str, Any]], Any]:
        def answer(params: dict[str, Any]) -> dict[str, Any]:
            messages = [
                {"message_id": next_message_id(), "user_id": self.self_id,
                 "time": int(time.time()), "message": sent.get("message")}
                for napcat in self.connections
                for call in napcat.api_calls
                if call.get("action") == action
                and str((sent := call.get("params", {})).get(key)) == str(params.get(key))
            ]  # fmt: skip
            return {"messages": messages}

        return answer


def _plain(message: Any) -> str:
    segments = message if isinstance(message, list) else []
    return "".join(
        str(seg.get("data", {}).get("text", "")) for seg in segments if seg.get("type") == "text"
    )


def _is_decision(body: dict[str, Any]) -> bool:
    return any(t.get("function", {}).get("name") == "reply" for t in body.get("tools", []))


def _reply(words: str) -> Reply:
    call = ToolCallSpec("reply", json.dumps({"text": words}, ensure_ascii=False))
    return Reply("", (call,), delay_s=0.3)


@pytest.fixture
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        # Each decision answers with words of its own: a reply sent twice shows.
        server.script_when(MODEL, _is_decision, *[_reply(f"好的{i:03d}") for i in range(300)])
        yield server


def _process(tmp: Any, name: str, url: str, model: FakeModelServer) -> BotProcess:
    env = {
        "PALLAS_DATABASE_URL": url, "PALLAS_PROCESS_NAME": name,
        "PALLAS_PROCESS_LEASE_S": str(LEASE_S), "LLM_BASE_URL": model.base_url,
        "LLM_MODEL": MODEL, "LLM_API_KEY": "sk-processes", "NICKNAME": '["牛牛"]',
    }  # fmt: skip
    return BotProcess(tmp / name, token=ACCESS_TOKEN, env=env)


async def _rows(engine: AsyncEngine, query: str) -> list[Any]:
    async with engine.connect() as conn:
        return list((await conn.execute(sql(query))).all())


async def _until(check: Callable[[], Any], what: str, timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


class Burst:
    """Members calling the bot in every chat, delivered as each NapCat would."""

    def __init__(self, a: QQAccount, b: QQAccount, first: FakeNapCat) -> None:
        self.a, self.b = a, b
        self.first = first  # its copy arrives a moment before the others: its process stores
        self.calls = 0

    async def round(self, r: int) -> None:
        a_live = [n for n in self.a.connections if n.is_open]
        b_live = [n for n in self.b.connections if n.is_open]
        await self._group(SHARED, 1000 + r, A, a_live + b_live)
        await self._group(SHARED, 1100 + r, B, a_live + b_live)
        await self._group(ONLY_A, 1200 + r, A, a_live)
        await self._group(ONLY_B, 1300 + r, B, b_live)
        await self._private(FRIEND_A, f"在吗{r}", a_live)
        await self._private(FRIEND_B, f"在吗{r}", b_live)

    async def _group(self, group: int, user: int, called: int, via: list[FakeNapCat]) -> None:
        seq, ids = str(next(_seqs)), {}  # one id per account, the same sequence for all
        for napcat in self._ordered(via):
            words = [at(called), text(f" 第{user}位")]
            pid = ids.setdefault(napcat.self_id, next_message_id())
            event = {**napcat.group_message(group, user, words, message_id=pid),
                     "real_seq": seq}  # fmt: skip
            await self._deliver(napcat, event)
        self.calls += 1

    async def _private(self, user: int, words: str, via: list[FakeNapCat]) -> None:
        pid = next_message_id()
        for napcat in self._ordered(via):
            await self._deliver(napcat, napcat.private_message(user, words, message_id=pid))
        self.calls += 1

    def _ordered(self, via: list[FakeNapCat]) -> list[FakeNapCat]:
        return sorted(via, key=lambda napcat: napcat is not self.first)

    async def _deliver(self, napcat: FakeNapCat, event: dict[str, Any]) -> None:
        await napcat.send_event(event)
        if napcat is self.first and napcat.is_open:
            await asyncio.sleep(0.2)


async def test_a_process_killed_mid_burst_loses_and_doubles_nothing(
    tmp_path: Any, postgres_url: str, model: FakeModelServer
) -> None:
    first = _process(tmp_path, "p1", postgres_url, model)
    second = _process(tmp_path, "p2", postgres_url, model)
    engine = create_engine(postgres_url)
    a, b = QQAccount(A), QQAccount(B)
    try:
        first.start()
        await first.wait_ready()
        second.start()
        await second.wait_ready()
        a1 = await a.connect_to(first, answers_sends=False).connect()
        await a.connect_to(second).connect()
        await b.connect_to(second).connect()
        await _until(lambda: _every_account_known(engine), "both processes to list their accounts")
        await asyncio.sleep(LEASE_S / 3 + 0.5)  # and each to have read the other's
        burst = Burst(a, b, a1)
        for r in range(KILLED_AFTER):
            await burst.round(r)
        # Killed with a send through A in flight: QQ has it, the receipt never came.
        await _until(lambda: _rows(engine, "SELECT id FROM outbox WHERE status = 'sending' "
                                           "AND holder = 'p1'"), "p1 sending through A")
        first.kill()
        await a1.close()
        for r in range(KILLED_AFTER, ROUNDS):
            await burst.round(r)
        await _settled(engine, burst.calls)
        await _nothing_lost_nothing_doubled(engine, a, b)
        assert "took over its work" in second.log()
    finally:
        first.stop()
        second.stop()
        for napcat in (*a.connections, *b.connections):
            await napcat.close()
        await engine.dispose()


async def _every_account_known(engine: AsyncEngine) -> bool:
    rows = await _rows(engine, "SELECT name, accounts FROM bot_process "
                               "WHERE name IN ('p1', 'p2') ORDER BY name")
    listed = [sorted(json.loads(a) if isinstance(a, str) else a) for _, a in rows]
    return listed == [[str(A)], [str(A), str(B)]]


async def _settled(engine: AsyncEngine, calls: int) -> None:
    async def done() -> bool:
        recovered = await _rows(
            engine, "SELECT 1 FROM bot_process WHERE name = 'p1' AND recovered_at IS NOT NULL"
        )
        open_rows = await _rows(
            engine, "SELECT 1 FROM outbox WHERE status IN ('pending', 'sending')"
        )
        answered = await _rows(
            engine, "SELECT count(*) FROM message WHERE from_bot = false AND turn_id IS NOT NULL"
        )
        return bool(recovered) and not open_rows and answered[0][0] >= calls and not (
            await _unfinished_turns(engine)
        )

    try:
        await _until(done, "both processes' work to be finished", timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {await _state(engine)}") from None


UNANSWERED_EVENTS = (
    "SELECT e.id, e.kind, e.reason, e.turn_id, e.message_id, e.payload FROM event e WHERE "
    "e.message_id IN (SELECT id FROM message WHERE from_bot = false AND turn_id IS NULL) "
    "ORDER BY e.id"
)


async def _state(engine: AsyncEngine) -> dict[str, Any]:
    """What is left, for a failure's message."""
    return {
        "processes": await _rows(engine, "SELECT name, recovered_by, recovered_at, accounts "
                                         "FROM bot_process"),
        "outbox": await _rows(engine, "SELECT id, status, account, holder, stream_id "
                                      "FROM outbox ORDER BY id"),
        "unanswered": await _rows(engine, "SELECT id, stream_id, stored_by, text FROM message "
                                          "WHERE from_bot = false AND turn_id IS NULL"),
        "unfinished": await _unfinished_turns(engine),
        "chat_turn": await _rows(engine, "SELECT * FROM chat_turn"),
        "events": await _rows(engine, UNANSWERED_EVENTS),
    }


async def _unfinished_turns(engine: AsyncEngine) -> list[Any]:
    return await _rows(
        engine,
        "SELECT s.turn_id FROM event s WHERE s.kind = 'turn_started' AND NOT EXISTS ("
        " SELECT 1 FROM event e WHERE e.turn_id = s.turn_id AND e.kind IN"
        " ('turn_finished', 'turn_interrupted', 'turn_failed', 'gate_dropped'))",
    )


async def _nothing_lost_nothing_doubled(engine: AsyncEngine, a: QQAccount, b: QQAccount) -> None:
    members = await _rows(engine, "SELECT id, turn_id FROM message WHERE from_bot = false")
    # Each call stored once (the same QQ message through A and B is one row) and taken by a
    # turn that ended.
    assert len(members) == ROUNDS * 6
    assert all(turn_id is not None for _, turn_id in members)
    assert not await _unfinished_turns(engine)
    # No batch turned twice: a message runs again only after its turn was cut off unanswered.
    started = await _rows(engine, "SELECT turn_id, payload FROM event WHERE kind = 'turn_started'")
    retried = {row[0] for row in await _rows(
        engine, "SELECT turn_id FROM event WHERE kind = 'turn_interrupted' AND reason = 'retry'"
    )}  # fmt: skip
    runs: dict[int, list[int]] = {}
    for turn_id, payload in started:
        for message_id in json.loads(payload)["message_ids"] if isinstance(payload, str) else (
            payload["message_ids"]
        ):
            runs.setdefault(message_id, []).append(turn_id)
    assert all(len([t for t in turns if t not in retried]) == 1 for turns in runs.values())
    # No reply sent twice, each through its own account, the dead process's confirmed from A's
    # history instead of sent again.
    texts = a.texts() + b.texts()
    assert len(texts) == len(set(texts)), texts
    rows = await _rows(engine, "SELECT status, account, payload FROM outbox")
    assert {status for status, _, _ in rows} == {"sent"}
    for _, account, payload in rows:
        words = (json.loads(payload) if isinstance(payload, str) else payload)["text"]
        assert words in (a.texts() if account == str(A) else b.texts()), (account, words)
    recovered = await _rows(engine, "SELECT reason FROM event WHERE kind = 'delivery_recovered'")
    assert ("confirmed",) in recovered
    taken_over = await _rows(engine, "SELECT recovered_by FROM bot_process WHERE name = 'p1'")
    assert taken_over == [("p2",)]
    # The dead process's jobs were released to the living at the takeover.
    assert not await _rows(
        engine, "SELECT id FROM job WHERE status = 'running' AND lease_holder LIKE 'p1|%'"
    )


async def test_a_process_frozen_mid_turn_is_taken_over_and_wakes_to_send_nothing(
    tmp_path: Any, postgres_url: str
) -> None:
    """SIGSTOP while its turn waits for the model, past the lease: the other process runs the
    cut-off call once more and answers. SIGCONT: the woken turn's reply is refused (its lease
    is not current), its renewal is refused, and it exits with 1. The group hears one answer."""
    async with FakeModelServer() as model:
        slow = Reply("", _reply("好的慢").tool_calls, delay_s=4.0)
        model.script_when(MODEL, _is_decision, slow, *[_reply(f"好的{i}") for i in range(5)])
        first = _process(tmp_path, "p1", postgres_url, model)
        second = _process(tmp_path, "p2", postgres_url, model)
        engine = create_engine(postgres_url)
        a = QQAccount(A)
        try:
            first.start()
            await first.wait_ready()
            second.start()
            await second.wait_ready()
            a1 = await a.connect_to(first).connect()
            await a.connect_to(second).connect()
            await Burst(a, QQAccount(B), a1)._group(ONLY_A, 1500, A, a.connections)
            await _until(lambda: _rows(engine, "SELECT 1 FROM event WHERE kind = "
                                               "'turn_started'"), "p1's turn")
            first.signal(signal.SIGSTOP)
            await _until(lambda: _rows(engine, "SELECT 1 FROM bot_process WHERE name = 'p1' "
                                               "AND recovered_at IS NOT NULL"), "the takeover")
            await _until(lambda: _async(a.texts()), "p2's answer")
            first.signal(signal.SIGCONT)
            assert await asyncio.to_thread(first.wait_exit, 30) == 1
            assert "its lease was taken over" in first.log()
            assert "lease is not current" in first.log()  # the woken turn queued nothing
            assert a.texts() == ["好的0"]  # one answer, from the retry in p2
            assert (await second.health())["ok"]
        finally:
            first.stop()
            second.stop()
            for napcat in a.connections:
                await napcat.close()
            await engine.dispose()


async def _async(value: Any) -> Any:
    return value


async def test_a_second_process_under_a_live_ones_name_is_refused(
    tmp_path: Any, postgres_url: str, model: FakeModelServer
) -> None:
    first = _process(tmp_path, "p1", postgres_url, model)
    namesake = _process(tmp_path, "p1-again", postgres_url, model)
    namesake.set_env("PALLAS_PROCESS_NAME", "p1")
    try:
        first.start()
        await first.wait_ready()
        code = await asyncio.to_thread(namesake.run_to_exit, 60)
        assert code != 0
        assert "another Pallas process named 'p1' is running on this store" in namesake.log()
        assert (await first.health())["ok"]
    finally:
        first.stop()
