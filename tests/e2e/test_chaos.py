"""Chaos: a burst of group chat, the bot SIGKILLed mid-flight, and every @ accounted for.

The real bot process, a fake NapCat over a real WebSocket (a new client after each restart, as
NapCat reconnects) and the fake model over real HTTP, which always answers with a `reply` whose
text is unique. Per seed (`random.Random(seed)`): one data dir; 150 messages in 20 groups (a
few busy ones, so unsolicited replies pile up there), 30 of them @ the bot, sent at a steady
pace; the bot killed with SIGKILL 3 or 4 times at seeded moments (right after an @, while the
@'s turn runs, inside a send before NapCat answers it, or anywhere) and started again on the
same data dir each time. Messages due while the bot is down are not sent at all (an outage:
OneBot v11 has no replay); after a few of them the chat pauses until the bot is back, so each
outage costs a handful of messages, not a restart's worth. NapCat answers sends with message
ids and reports the bot's own messages back as `message_sent` ("report self messages" on). QQ's
side keeps every message that went out, also one whose answer was lost to the kill, and NapCat
answers `get_msg` and `get_group_msg_history` from it.

After the burst the bot runs until no outbox row is open and no turn is running, then the
ledger is audited (docs/architecture.md "Audit event kinds", docs/gating.md, docs/delivery.md,
docs/agent.md):

- every stored @ of a member has exactly one outcome: its ingress `gate_dropped`, or the
  terminal event of the last turn that took it (`turn_finished`, `turn_failed`, the batch
  `gate_dropped`, `turn_interrupted` given_up), or a retry owed to it given up at a later
  start (`turn_interrupted` given_up with no turn); and, as the model always replies, that
  outcome is a reply (`turn_finished` done) or `given_up`;
- every started turn has exactly one closing event: a terminal one, or `turn_interrupted` retry
  or `turn_waiting`, after which a later turn takes its messages again (or, for a retry, a
  later start gives it up);
- every outbox row reached a final status (sent, failed, unknown, expired, dropped);
- no reply text reached NapCat twice, across all connections (sends cut by a kill included);
- no message row is doubled, and the bot's log has no Traceback.

A failure prints the broken rules and a table of every stored @ (platform id, group, gate,
the turns that took it with their closing events, their outbox rows). Every run prints its
stats (kills, counts, how long an @ waited for its answer, seconds spent).

Timing is real, so one seed does not replay exactly; the seed fixes the plan (the messages,
the kills, the model's answers). The suite runs seeds 1 and 2 (under a minute each). The long
run, seeds 1..N:

    PALLAS_CHAOS_SEEDS=10 python -m pytest tests/e2e/test_chaos.py
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import websockets

from tests.support.bot_process import BotProcess
from tests.support.chaos_audit import CLOSING, OPEN_STATUSES, audit
from tests.support.chaos_napcat import QQ, ChaosNapCat, CutHook
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import at, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import TimelineDb

SEEDS = range(1, 1 + int(os.environ.get("PALLAS_CHAOS_SEEDS", "2")))

SELF_ID = 46_301
MODEL = "e2e-chaos"
GROUPS = 20
FIRST_GROUP = 88_001
USERS_PER_GROUP = 4
MESSAGES = 150
MENTIONS = 30
PACE_S = 0.15  # one message every 150 ms: 22 s of chat
OUTAGE_DROPS = 5  # messages lost per outage; then the chat waits for the bot to be back
ANSWERS = 2_000  # scripted model answers, far more than a run uses
SEND_CUT_WAIT_S = 4.0  # a kill armed for the next send fires anyway after this long
DRAIN_TIMEOUT_S = 120.0  # after the burst: the bot left running until it settles
QUIET_S = 2.0  # settled: nothing open, nothing running, no new ledger row for this long

GROUP_WEIGHTS = [1 / (rank + 1) for rank in range(GROUPS)]


# ----- the plan: what is said, and when the bot dies ------------------------------------------


@dataclass(frozen=True)
class Planned:
    index: int
    group_id: int
    user_id: int
    at_bot: bool
    words: str


@dataclass(frozen=True)
class Kill:
    index: int  # right after sending this planned message (or arming, for "send")
    mode: str  # "at" / "turn" / "send" / "any"
    delay_s: float
    variant: str = ""  # "send": "before_echo" or "after_echo"

    def describe(self) -> str:
        detail = self.variant or f"+{self.delay_s:.2f}s"
        return f"{self.mode}@msg{self.index}({detail})"


def plan_burst(rng: random.Random) -> tuple[list[Planned], list[Kill]]:
    mentions = set(rng.sample(range(MESSAGES), MENTIONS))
    messages: list[Planned] = []
    for index in range(MESSAGES):
        # A few busy groups and a long quiet tail (weights 1, 1/2, 1/3, ...).
        group_id = FIRST_GROUP + rng.choices(range(GROUPS), weights=GROUP_WEIGHTS)[0]
        user_id = group_id * 10 + rng.randrange(USERS_PER_GROUP)
        at_bot = index in mentions
        words = f" 问你个事{index}" if at_bot else f"随便聊聊{index}"  # unique: no repeat plugin
        messages.append(Planned(index, group_id, user_id, at_bot, words))
    count = rng.choice((3, 4))
    modes = rng.sample(["at", "turn", "send", "any"], count)
    span = (MESSAGES - 30) / count
    kills: list[Kill] = []
    for k, mode in enumerate(modes):
        low, high = 15 + int(k * span), 15 + int((k + 1) * span) - 10
        index = rng.randrange(low, high)
        if mode in ("at", "turn"):
            ats = [i for i in range(low, high) if i in mentions]
            later = [i for i in ats if i >= index]
            if later or ats:
                index = (later or ats)[0]
            else:
                mode = "any"
        delay = {
            "at": rng.uniform(0.0, 0.15),  # ingress, the gate or the turn's claim is cut
            "turn": rng.uniform(0.2, 1.2),  # the model call, the reply's commit or its send
            "send": 0.0,
            "any": rng.uniform(0.0, PACE_S),
        }[mode]
        variant = rng.choice(("before_echo", "after_echo")) if mode == "send" else ""
        kills.append(Kill(index, mode, delay, variant))
    return messages, kills


def model_answers(rng: random.Random) -> list[Reply]:
    """Always a reply, every text unique, after a short think (so a kill can cut the call)."""
    return [
        Reply(
            "",
            (ToolCallSpec("reply", json.dumps({"text": f"收到第{n}号回复"}, ensure_ascii=False)),),
            delay_s=round(rng.uniform(0.05, 0.8), 3),
        )
        for n in range(ANSWERS)
    ]


# ----- the run --------------------------------------------------------------------------------


@dataclass
class Chaos:
    bot: BotProcess
    model: FakeModelServer
    timeline: TimelineDb
    rng: random.Random
    qq: QQ = field(default_factory=QQ)
    napcats: list[ChaosNapCat] = field(default_factory=list)
    up: bool = False
    kills: list[str] = field(default_factory=list)
    offered: int = 0  # messages handed to a live connection
    skipped: int = 0  # messages due while the bot was down
    mark: int = 0  # the ledger's last event id when the bot was last killed
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def napcat(self) -> ChaosNapCat:
        return self.napcats[-1]

    async def connect(self) -> None:
        rng = random.Random(self.rng.random())
        napcat = ChaosNapCat(self.bot.ws_url, SELF_ID, self.qq, rng, CutHook(self))
        self.napcats.append(napcat)
        await napcat.connect()
        self.up = True

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        self.tasks.append(asyncio.create_task(work))

    def kill(self, why: str) -> bool:
        if not self.up:
            self.kills.append(f"skipped (already down): {why}")
            return False
        self.up = False
        self.bot.kill()
        self.kills.append(why)
        self.mark = self.timeline.scalar("SELECT coalesce(max(id), 0) FROM event") or 0
        return True

    async def restart(self) -> None:
        await self.napcat.close()
        self.bot.start()
        await self.bot.wait_ready()
        await self.connect()

    async def kill_later(self, kill: Kill) -> None:
        await asyncio.sleep(kill.delay_s)
        if self.kill(kill.describe()):
            await self.restart()

    async def kill_in_next_send(self, kill: Kill) -> None:
        napcat = self.napcat
        napcat.cut_next_send = kill.variant
        await asyncio.sleep(SEND_CUT_WAIT_S)
        if napcat.cut_next_send and napcat is self.napcat:  # no send came: kill anyway
            napcat.cut_next_send = ""
            if self.kill(f"{kill.describe()}: no send within {SEND_CUT_WAIT_S}s"):
                await self.restart()

    async def burst(self, messages: list[Planned], kills: list[Kill]) -> None:
        """Send the planned messages at a steady pace, and kill the bot where planned.

        A message due while the bot is down is lost (counted in `skipped`); after
        OUTAGE_DROPS of them the chat pauses until the bot is back, so each outage costs a
        few messages rather than a restart's worth.
        """
        loop = asyncio.get_running_loop()
        start = loop.time()
        kill_at = {kill.index: kill for kill in kills}
        lost_in_outage = 0
        for planned in messages:
            await asyncio.sleep(max(0.0, start + planned.index * PACE_S - loop.time()))
            if not self.up and lost_in_outage >= OUTAGE_DROPS:
                paused = loop.time()
                while not self.up:
                    for task in self.tasks:
                        if task.done():
                            task.result()  # a restart that failed fails the test here
                    assert loop.time() - paused < 90, "the bot did not come back"
                    await asyncio.sleep(0.05)
                start += loop.time() - paused
            lost_in_outage = 0 if self.up else lost_in_outage + 1
            segments = [at(SELF_ID), text(planned.words)] if planned.at_bot else planned.words
            event = self.napcat.group_message(planned.group_id, planned.user_id, segments)
            self.qq.record(event)
            if self.up and self.napcat.is_open:
                try:
                    await self.napcat.send_event(event)
                    self.offered += 1
                except websockets.ConnectionClosed:
                    self.skipped += 1
            else:
                self.skipped += 1
            kill = kill_at.get(planned.index)
            if kill is not None and kill.mode == "send":
                self.spawn(self.kill_in_next_send(kill))
            elif kill is not None:
                self.spawn(self.kill_later(kill))
        while self.tasks:  # a restart may itself be spawned by a cut send
            await self.tasks.pop(0)

    async def settle(self) -> bool:
        """Wait until nothing is open, no turn of the last run is running, the ledger is quiet."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DRAIN_TIMEOUT_S
        last: tuple[int, int, int] | None = None
        quiet_since = loop.time()
        while loop.time() < deadline:
            try:
                state = (
                    self.timeline.scalar("SELECT coalesce(max(id), 0) FROM event") or 0,
                    _open_rows(self.timeline),
                    len(_running_turns(self.timeline, self.mark)),
                )
            except sqlite3.OperationalError:
                state = None
            if state != last:
                last, quiet_since = state, loop.time()
            elif state is not None and state[1:] == (0, 0) and loop.time() - quiet_since > QUIET_S:
                return True
            await asyncio.sleep(0.25)
        return False

    def sent_texts(self) -> list[str]:
        return [sent for napcat in self.napcats for sent in napcat.sent_texts()]


def _open_rows(timeline: TimelineDb) -> int:
    marks = ",".join("?" * len(OPEN_STATUSES))
    query = f"SELECT count(*) FROM outbox WHERE status IN ({marks})"
    return int(timeline.scalar(query, *sorted(OPEN_STATUSES)) or 0)


def _running_turns(timeline: TimelineDb, mark: int) -> list[int]:
    """Turns started after `mark` (the last kill) that have no closing event yet."""
    started = timeline.query(
        "SELECT turn_id FROM event WHERE kind = 'turn_started' AND id > ?", mark
    )
    marks = ",".join("?" * len(CLOSING))
    closed = {
        row["turn_id"]
        for row in timeline.query(
            f"SELECT turn_id FROM event WHERE kind IN ({marks}) AND turn_id IS NOT NULL", *CLOSING
        )
    }
    return [row["turn_id"] for row in started if row["turn_id"] not in closed]


# ----- the test -------------------------------------------------------------------------------


@pytest.fixture
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS, ids=lambda seed: f"seed{seed}")
async def test_every_at_has_one_outcome_through_kills_and_restarts(
    seed: int, tmp_path: Path, model: FakeModelServer
) -> None:
    rng = random.Random(seed)
    messages, kills = plan_burst(rng)
    model.script(MODEL, *model_answers(rng))
    env = {"LLM_BASE_URL": model.base_url, "LLM_MODEL": MODEL, "LLM_API_KEY": "sk-e2e"}
    bot = BotProcess(tmp_path, token=ACCESS_TOKEN, env=env)
    chaos = Chaos(bot, model, TimelineDb(bot.db_path), rng)
    loop = asyncio.get_running_loop()
    began = loop.time()
    bot.start()
    try:
        await bot.wait_ready()
        await chaos.connect()
        await chaos.burst(messages, kills)
        burst_done = loop.time()
        settled = await chaos.settle()
        result = audit(
            chaos.timeline,
            sent_texts=chaos.sent_texts(),
            log=bot.log(),
            run_stats={
                "kills": chaos.kills,
                "offered": chaos.offered,
                "skipped_while_down": chaos.skipped,
            },
            model_requests=len(model.requests),
            self_id=SELF_ID,
        )
        result.stats["seconds"] = {
            "burst": round(burst_done - began, 1),
            "settle": round(loop.time() - burst_done, 1),
        }
        if not settled:
            result.problems.setdefault(
                f"the bot did not settle within {DRAIN_TIMEOUT_S:.0f}s after the burst",
                [f"{len(_running_turns(chaos.timeline, chaos.mark))} turn(s) running"],
            )
        print(f"\nseed {seed}: {result.stats}")
        assert not result.problems, f"seed {seed}\n{result.report()}"
    finally:
        for napcat in chaos.napcats:
            await napcat.close()
        bot.stop()
