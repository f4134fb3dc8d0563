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
  `gate_dropped`, `turn_interrupted` given_up);
- every started turn has exactly one closing event: a terminal one, or `turn_interrupted` retry
  or `turn_waiting`, after which a later turn takes its messages again;
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
import contextlib
import json
import os
import random
import sqlite3
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import websockets

from tests.support.bot_process import BotProcess
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, at, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import TimelineDb

SEEDS = range(1, 1 + int(os.environ.get("PALLAS_CHAOS_SEEDS", "2")))

SELF_ID = 46_301
MODEL = "e2e-chaos"
SEND = "send_group_msg"
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
CLOSING = ("turn_finished", "turn_failed", "gate_dropped", "turn_interrupted", "turn_waiting")
FINAL_STATUSES = {"sent", "failed", "unknown", "expired", "dropped"}
OPEN_STATUSES = {"pending", "sending"}
# Tracebacks in the bot's log known to be harmless, by a piece of their exception line (the
# first unindented line after "Traceback"). None are today.
HARMLESS_TRACEBACKS: tuple[str, ...] = ()


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


# ----- QQ and NapCat --------------------------------------------------------------------------


class QQ:
    """QQ's own side: every group message that went out, whether or not its sender heard back."""

    def __init__(self) -> None:
        self.messages: dict[int, dict[str, Any]] = {}

    def record(self, event: dict[str, Any]) -> None:
        self.messages[int(event["message_id"])] = event

    def get_msg(self, params: dict[str, Any]) -> dict[str, Any] | None:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            return self.messages[int(params["message_id"])]
        return None

    def group_history(self, params: dict[str, Any]) -> dict[str, Any]:
        group_id = int(params.get("group_id", 0))
        before = int(params.get("message_seq") or 0)
        count = int(params.get("count") or 20)
        in_group = [
            m
            for m in self.messages.values()
            if m.get("group_id") == group_id and (not before or m["message_id"] <= before)
        ]
        return {"messages": in_group[-count:]}


class ChaosNapCat(FakeNapCat):
    """Answers sends with message ids, echoes them as `message_sent`, and can die inside one."""

    def __init__(self, ws_url: str, qq: QQ, rng: random.Random, cut: CutHook) -> None:
        super().__init__(ws_url, SELF_ID, ACCESS_TOKEN)
        self.qq = qq
        self.rng = rng
        self.cut = cut
        self.cut_next_send = ""  # "before_echo" / "after_echo": the next send kills the bot
        self.responders["get_msg"] = qq.get_msg
        self.responders["get_group_msg_history"] = qq.group_history

    def sent_texts(self) -> list[str]:
        return [_text_of(params) for params in self.calls_to(SEND)]

    async def _answer(self, call: dict[str, Any]) -> None:
        if call.get("action") != SEND:
            await super()._answer(call)
            return
        params = call.get("params", {})
        group_id = int(params.get("group_id", 0))
        segments = params.get("message") or []
        own = self.group_message(group_id, SELF_ID, segments, post_type="message_sent")
        # NapCat stamps every message it reports (and keeps in its history) with its time.
        own.update(message_sent_type="self", target_id=group_id, time=int(time.time()))
        self.qq.record(own)  # from here on the message is in the group
        cut, self.cut_next_send = self.cut_next_send, ""
        if cut == "before_echo":  # NapCat took it; the bot dies before any report or answer
            self.cut(f"in a send, before its echo: {_text_of(params)}")
            return
        if cut == "after_echo":  # NapCat reported it; the bot dies before the answer
            await self.send_event(own)
            await asyncio.sleep(self.rng.uniform(0.0, 0.05))
            self.cut(f"in a send, after its echo: {_text_of(params)}")
            return
        answer = {
            "status": "ok",
            "retcode": 0,
            "data": {"message_id": own["message_id"]},
            "echo": call.get("echo"),
        }
        echo_first = self.rng.random() < 0.5  # NapCat's report may come before its answer
        if echo_first:
            await self.send_event(own)
        await self.send_raw(json.dumps(answer))
        if not echo_first:
            await self.send_event(own)


class CutHook:
    """Called by NapCat from inside a send: kill the bot now, restart it in the background."""

    def __init__(self, chaos: Chaos) -> None:
        self.chaos = chaos

    def __call__(self, why: str) -> None:
        if self.chaos.kill(why):
            self.chaos.spawn(self.chaos.restart())


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
        napcat = ChaosNapCat(self.bot.ws_url, self.qq, rng, CutHook(self))
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
        await self.bot.wait_ready(timeout=60)
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


def _text_of(params: dict[str, Any]) -> str:
    message = params.get("message")
    if isinstance(message, str):
        return message
    return "".join(
        seg.get("data", {}).get("text", "")
        for seg in message or []
        if isinstance(seg, dict) and seg.get("type") == "text"
    )


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


# ----- the audit ------------------------------------------------------------------------------


@dataclass
class TurnFacts:
    turn_id: int
    started: int  # the turn_started event id: the order of turns
    message_ids: list[int]
    closers: list[tuple[str, str]] = field(default_factory=list)  # (kind, reason)

    @property
    def terminal(self) -> list[str]:
        return [_outcome(k, r) for k, r in self.closers if _is_terminal(k, r)]

    @property
    def gave_back(self) -> bool:
        return any(not _is_terminal(kind, reason) for kind, reason in self.closers)

    def label(self) -> str:
        closing = ",".join(f"{k.removeprefix('turn_')}/{r}" for k, r in self.closers) or "-"
        return f"t{self.turn_id}[{closing}]"


def _is_terminal(kind: str, reason: str) -> bool:
    if kind == "turn_waiting":
        return False
    return not (kind == "turn_interrupted" and reason == "retry")


def _outcome(kind: str, reason: str) -> str:
    return {
        "turn_finished": reason,
        "turn_failed": f"failed:{reason}",
        "gate_dropped": f"dropped:{reason}",
        "turn_interrupted": "interrupted" if reason == "given_up" else f"interrupted:{reason}",
    }.get(kind, f"{kind}:{reason}")


@dataclass
class Audit:
    problems: dict[str, list[str]]
    table: list[str]
    stats: dict[str, Any]

    def report(self) -> str:
        lines = [f"stats: {self.stats}", "broken rules:"]
        for rule, items in self.problems.items():
            more = f", ... ({len(items)} in all)" if len(items) > 12 else ""
            shown = ", ".join(items[:12]) + more
            lines.append(f"  - {rule} [{len(items)}]: {shown}")
        lines.append("every stored @ (!! = no outcome or more than one):")
        lines.extend(self.table)
        return "\n".join(lines)


def audit(chaos: Chaos) -> Audit:
    timeline = chaos.timeline
    problems: dict[str, list[str]] = defaultdict(list)
    events = timeline.query(
        "SELECT id, kind, reason, turn_id, message_id, payload, created_at FROM event ORDER BY id"
    )
    messages = timeline.query(
        "SELECT m.id, m.platform_message_id, m.from_bot, m.mentions, m.stored_at, "
        "s.external_id AS grp "
        "FROM message m JOIN stream s ON s.id = m.stream_id ORDER BY m.id"
    )
    outbox = timeline.query("SELECT id, turn_id, status, payload FROM outbox ORDER BY id")

    turns: dict[int, TurnFacts] = {}
    ingress: dict[int, list[str]] = defaultdict(list)  # message id -> gate decisions
    queued: dict[int, list[int]] = {}  # turn id -> outbox ids of its reply
    delivered_at: dict[int, datetime] = {}  # outbox id -> when NapCat confirmed it
    for event in events:
        kind, turn_id, payload = event["kind"], event["turn_id"], json.loads(event["payload"])
        if kind == "turn_started":
            turns[turn_id] = TurnFacts(turn_id, event["id"], list(payload.get("message_ids", [])))
        elif kind in ("gate_passed", "gate_dropped") and turn_id is None:
            word = "passed" if kind == "gate_passed" else f"dropped:{event['reason']}"
            ingress[event["message_id"]].append(word)
        elif kind in CLOSING and turn_id is not None:
            if turn_id in turns:
                turns[turn_id].closers.append((kind, event["reason"]))
            else:
                problems["a closing event for a turn that never started"].append(f"t{turn_id}")
        if kind == "reply_queued":
            queued[turn_id] = list(payload.get("outbox_ids", []))
        if kind == "delivered":
            delivered_at[payload.get("outbox_id")] = datetime.fromisoformat(event["created_at"])

    claims: dict[int, list[TurnFacts]] = defaultdict(list)
    for turn in sorted(turns.values(), key=lambda t: t.started):
        for message_id in turn.message_ids:
            claims[message_id].append(turn)

    for turn in turns.values():
        if not turn.closers:
            problems["a started turn has no closing event"].append(f"t{turn.turn_id}")
        elif len(turn.closers) > 1:
            problems["a turn has more than one closing event"].append(turn.label())
        elif turn.gave_back:
            taken_again = all(claims[m][-1].started > turn.started for m in turn.message_ids)
            if not taken_again:
                problems["a turn gave its messages back and no later turn took them"].append(
                    turn.label()
                )

    rows_of: dict[int | None, list[sqlite3.Row]] = defaultdict(list)
    for row in outbox:
        rows_of[row["turn_id"]].append(row)
        if row["status"] in OPEN_STATUSES:
            problems["an outbox row never reached a final status"].append(
                f"t{row['turn_id']}:{row['status']}:{json.loads(row['payload']).get('text')}"
            )
        elif row["status"] not in FINAL_STATUSES:
            problems["an outbox row in an undocumented status"].append(
                f"#{row['id']}:{row['status']}"
            )
    known_rows = {row["id"] for row in outbox}
    for turn_id, ids in queued.items():
        if not set(ids) <= known_rows:
            problems["reply_queued names outbox rows that do not exist"].append(f"t{turn_id}")

    ats = [
        m
        for m in messages
        if not m["from_bot"] and str(SELF_ID) in [str(x) for x in json.loads(m["mentions"])]
    ]
    latencies: list[float] = []  # an @ stored -> the first bubble of its answer confirmed
    table = [f"{'':2} {'platform id':>11} {'group':>6} {'gate':<10} {'outcome':<14} turns | outbox"]
    for message in ats:
        mid = message["id"]
        taken = claims.get(mid, [])
        outcomes = [g for g in ingress.get(mid, []) if g != "passed"]
        outcomes += [o for turn in taken for o in turn.terminal]
        if len(outcomes) > 1:
            problems["an @ has more than one outcome"].append(message["platform_message_id"])
        elif not outcomes:
            if not taken and not ingress.get(mid):
                why = "an @ has only its inbound row (no gate decision, no turn)"
            elif not taken:
                why = "an @ passed the gate and no turn took it"
            elif not taken[-1].closers:
                why = "an @'s last turn was cut off (no closing event)"
            else:
                why = "an @ was given back and no later turn took it"
            problems[why].append(message["platform_message_id"])
        answered = [r["id"] for r in rows_of.get(taken[-1].turn_id, [])] if taken else []
        if answered and answered[0] in delivered_at:
            stored_at = datetime.fromisoformat(message["stored_at"])
            latencies.append((delivered_at[answered[0]] - stored_at).total_seconds())
        delivery = " ".join(
            f"t{turn.turn_id}:" + ",".join(r["status"] for r in rows_of.get(turn.turn_id, []))
            for turn in taken
            if rows_of.get(turn.turn_id)
        )
        table.append(
            f"{'' if len(outcomes) == 1 else '!!':2} {message['platform_message_id']:>11} "
            f"{message['grp']:>6} {'/'.join(ingress.get(mid, [])) or '-':<10} "
            f"{'+'.join(outcomes) or '-':<14} "
            f"{' '.join(t.label() for t in taken) or '-'} | {delivery or '-'}"
        )

    sent = Counter(chaos.sent_texts())
    doubled = [f"{t!r}x{n}" for t, n in sent.items() if n > 1]
    if doubled:
        problems["a reply text reached NapCat more than once"].extend(doubled)
    rows_doubled = timeline.query(
        "SELECT stream_id, platform_message_id, count(*) AS n FROM message "
        "GROUP BY stream_id, platform_message_id HAVING n > 1"
    )
    for row in rows_doubled:
        problems["a message row is doubled"].append(f"{row['platform_message_id']}x{row['n']}")
    for raised in _tracebacks(chaos.bot.log()):
        if not any(ok in raised for ok in HARMLESS_TRACEBACKS):
            problems["the bot log has a Traceback"].append(raised[:160])

    recovered = Counter(e["reason"] for e in events if e["kind"] == "delivery_recovered")
    stats = {
        "kills": chaos.kills,
        "offered": chaos.offered,
        "skipped_while_down": chaos.skipped,
        "stored_member_messages": sum(1 for m in messages if not m["from_bot"]),
        "stored_ats": len(ats),
        "turns": len(turns),
        "outbox": dict(Counter(row["status"] for row in outbox)),
        "sends": sum(sent.values()),
        "delivery_recovered": dict(recovered),
        "model_requests": len(chaos.model.requests),
        "at_answer_latency_s": {
            "median": round(statistics.median(latencies), 1) if latencies else None,
            "max": round(max(latencies), 1) if latencies else None,
        },
    }
    return Audit(dict(problems), table, stats)


def _tracebacks(log: str) -> list[str]:
    """The exception line of every Traceback in the log."""
    lines = log.splitlines()
    found: list[str] = []
    for index, line in enumerate(lines):
        if "Traceback" not in line:
            continue
        after = lines[index + 1 :]
        frame = (" ", ">", "File", "Traceback")  # frames, loguru's backtrace marker
        found.append(next((x for x in after if x and not x.startswith(frame)), line).strip())
    return found


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
        result = audit(chaos)
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
