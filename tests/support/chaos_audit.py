"""The chaos test's audit of the bot's ledger (tests/e2e/test_chaos.py).

`audit` reads the event, message and outbox tables and checks the rules the chaos test
documents: every stored @ has exactly one outcome (a reply or `given_up`), every started
turn exactly one closing event, every outbox row a final status, no reply text sent twice,
no doubled message row, no Traceback in the bot's log. It returns the broken rules, a table
of every stored @ and the run's stats.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tests.support.timeline_db import TimelineDb

CLOSING = ("turn_finished", "turn_failed", "gate_dropped", "turn_interrupted", "turn_waiting")
FINAL_STATUSES = {"sent", "failed", "unknown", "expired", "dropped"}
OPEN_STATUSES = {"pending", "sending"}
# How an @ may end when the model always replies: answered, or given up after a crash (its
# turn's `turn_interrupted` given_up, or a retry owed across starts given up).
AT_OUTCOMES = ("done", "interrupted")
# Tracebacks in the bot's log known to be harmless, by a piece of their exception line (the
# first unindented line after "Traceback"). None are today.
HARMLESS_TRACEBACKS: tuple[str, ...] = ()

Problems = dict[str, list[str]]  # a broken rule -> what broke it


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
    problems: Problems
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


def audit(
    timeline: TimelineDb,
    *,
    sent_texts: list[str],
    log: str,
    run_stats: dict[str, Any],
    model_requests: int,
    self_id: int,
) -> Audit:
    """Audit the ledger. `sent_texts`: every reply text NapCat received, on all connections;
    `log`: the bot's log; `run_stats`: the run's own stats, first in the result's."""
    problems: Problems = defaultdict(list)
    ledger = read_ledger(timeline, problems)
    check_turns(ledger, problems)
    check_outbox(ledger, problems)
    ats = mentions_of(ledger.messages, self_id)
    table, latencies = check_ats(ledger, ats, problems)
    sent = Counter(sent_texts)
    check_doubles(timeline, sent, log, problems)
    stats = {**run_stats, **ledger_stats(ledger, ats, sent), "model_requests": model_requests}
    stats["at_answer_latency_s"] = {
        "median": round(statistics.median(latencies), 1) if latencies else None,
        "max": round(max(latencies), 1) if latencies else None,
    }
    return Audit(dict(problems), table, stats)


# ----- reading the ledger ---------------------------------------------------------------------


@dataclass
class Ledger:
    """The bot's tables, and what the audit indexes from them."""

    events: list[sqlite3.Row]
    messages: list[sqlite3.Row]
    outbox: list[sqlite3.Row]
    turns: dict[int, TurnFacts] = field(default_factory=dict)
    ingress: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))  # gate
    queued: dict[int, list[int]] = field(default_factory=dict)  # turn id -> its reply's rows
    delivered_at: dict[int, datetime] = field(default_factory=dict)  # row -> NapCat confirmed
    claims: dict[int, list[TurnFacts]] = field(default_factory=lambda: defaultdict(list))
    rows_of: dict[int | None, list[sqlite3.Row]] = field(
        default_factory=lambda: defaultdict(list)
    )  # turn id -> its outbox rows


def read_ledger(timeline: TimelineDb, problems: Problems) -> Ledger:
    ledger = Ledger(
        events=timeline.query(
            "SELECT id, kind, reason, turn_id, message_id, payload, created_at "
            "FROM event ORDER BY id"
        ),
        messages=timeline.query(
            "SELECT m.id, m.platform_message_id, m.from_bot, m.mentions, m.stored_at, "
            "s.external_id AS grp "
            "FROM message m JOIN stream s ON s.id = m.stream_id ORDER BY m.id"
        ),
        outbox=timeline.query("SELECT id, turn_id, status, payload FROM outbox ORDER BY id"),
    )
    for event in ledger.events:
        _read_event(ledger, event, problems)
    for turn in sorted(ledger.turns.values(), key=lambda t: t.started):
        for message_id in turn.message_ids:
            ledger.claims[message_id].append(turn)
    for row in ledger.outbox:
        ledger.rows_of[row["turn_id"]].append(row)
    return ledger


def _read_event(ledger: Ledger, event: sqlite3.Row, problems: Problems) -> None:
    kind, turn_id, payload = event["kind"], event["turn_id"], json.loads(event["payload"])
    if kind == "turn_started":
        ledger.turns[turn_id] = TurnFacts(
            turn_id, event["id"], list(payload.get("message_ids", []))
        )
    elif kind in ("gate_passed", "gate_dropped") and turn_id is None:
        word = "passed" if kind == "gate_passed" else f"dropped:{event['reason']}"
        ledger.ingress[event["message_id"]].append(word)
    elif kind == "turn_interrupted" and turn_id is None:
        # A retry owed from an earlier start, given up at this one: the message's outcome.
        ledger.ingress[event["message_id"]].append(_outcome(kind, event["reason"]))
    elif kind in CLOSING and turn_id is not None:
        if turn_id in ledger.turns:
            ledger.turns[turn_id].closers.append((kind, event["reason"]))
        else:
            problems["a closing event for a turn that never started"].append(f"t{turn_id}")
    if kind == "reply_queued":
        ledger.queued[turn_id] = list(payload.get("outbox_ids", []))
    if kind == "delivered":
        at = datetime.fromisoformat(event["created_at"])
        ledger.delivered_at[payload.get("outbox_id")] = at


def mentions_of(messages: list[sqlite3.Row], self_id: int) -> list[sqlite3.Row]:
    """The stored messages of members that @ the bot."""
    return [
        m
        for m in messages
        if not m["from_bot"] and str(self_id) in [str(x) for x in json.loads(m["mentions"])]
    ]


# ----- the checks -----------------------------------------------------------------------------


def check_turns(ledger: Ledger, problems: Problems) -> None:
    """Every started turn has one closing event; one that gave back was taken again."""
    for turn in ledger.turns.values():
        if not turn.closers:
            problems["a started turn has no closing event"].append(f"t{turn.turn_id}")
        elif len(turn.closers) > 1:
            problems["a turn has more than one closing event"].append(turn.label())
        elif turn.gave_back:
            claims, ingress = ledger.claims, ledger.ingress
            taken_again = all(
                claims[m][-1].started > turn.started or "interrupted" in ingress.get(m, [])
                for m in turn.message_ids
            )
            if not taken_again:
                problems["a turn gave its messages back and no later turn took them"].append(
                    turn.label()
                )


def check_outbox(ledger: Ledger, problems: Problems) -> None:
    """Every outbox row is final, and every row a reply_queued names exists."""
    for row in ledger.outbox:
        if row["status"] in OPEN_STATUSES:
            problems["an outbox row never reached a final status"].append(
                f"t{row['turn_id']}:{row['status']}:{json.loads(row['payload']).get('text')}"
            )
        elif row["status"] not in FINAL_STATUSES:
            problems["an outbox row in an undocumented status"].append(
                f"#{row['id']}:{row['status']}"
            )
    known_rows = {row["id"] for row in ledger.outbox}
    for turn_id, ids in ledger.queued.items():
        if not set(ids) <= known_rows:
            problems["reply_queued names outbox rows that do not exist"].append(f"t{turn_id}")


def check_ats(
    ledger: Ledger, ats: list[sqlite3.Row], problems: Problems
) -> tuple[list[str], list[float]]:
    """Every stored @ has exactly one outcome. Returns the table of every stored @, and how
    long each answered @ waited (stored -> the first bubble of its answer confirmed)."""
    latencies: list[float] = []
    table = [f"{'':2} {'platform id':>11} {'group':>6} {'gate':<10} {'outcome':<14} turns | outbox"]
    for message in ats:
        mid = message["id"]
        taken = ledger.claims.get(mid, [])
        gate = ledger.ingress.get(mid, [])
        outcomes = [g for g in gate if g != "passed"]
        outcomes += [o for turn in taken for o in turn.terminal]
        if len(outcomes) > 1:
            problems["an @ has more than one outcome"].append(message["platform_message_id"])
        elif not outcomes:
            problems[_why_no_outcome(taken, gate)].append(message["platform_message_id"])
        elif outcomes[0] not in AT_OUTCOMES:
            problems["an @ ended neither with a reply nor given up"].append(
                f"{message['platform_message_id']}:{outcomes[0]}"
            )
        answered = [r["id"] for r in ledger.rows_of.get(taken[-1].turn_id, [])] if taken else []
        if answered and answered[0] in ledger.delivered_at:
            stored_at = datetime.fromisoformat(message["stored_at"])
            latencies.append((ledger.delivered_at[answered[0]] - stored_at).total_seconds())
        table.append(_at_line(ledger, message, gate, outcomes, taken))
    return table, latencies


def _why_no_outcome(taken: list[TurnFacts], gate: list[str]) -> str:
    if not taken and not gate:
        return "an @ has only its inbound row (no gate decision, no turn)"
    if not taken:
        return "an @ passed the gate and no turn took it"
    if not taken[-1].closers:
        return "an @'s last turn was cut off (no closing event)"
    return "an @ was given back and no later turn took it"


def _at_line(
    ledger: Ledger,
    message: sqlite3.Row,
    gate: list[str],
    outcomes: list[str],
    taken: list[TurnFacts],
) -> str:
    delivery = " ".join(
        f"t{turn.turn_id}:" + ",".join(r["status"] for r in ledger.rows_of.get(turn.turn_id, []))
        for turn in taken
        if ledger.rows_of.get(turn.turn_id)
    )
    return (
        f"{'' if len(outcomes) == 1 else '!!':2} {message['platform_message_id']:>11} "
        f"{message['grp']:>6} {'/'.join(gate) or '-':<10} "
        f"{'+'.join(outcomes) or '-':<14} "
        f"{' '.join(t.label() for t in taken) or '-'} | {delivery or '-'}"
    )


def check_doubles(timeline: TimelineDb, sent: Counter[str], log: str, problems: Problems) -> None:
    """No reply text sent twice, no message row doubled, no Traceback in the bot's log."""
    doubled = [f"{t!r}x{n}" for t, n in sent.items() if n > 1]
    if doubled:
        problems["a reply text reached NapCat more than once"].extend(doubled)
    rows_doubled = timeline.query(
        "SELECT stream_id, platform_message_id, count(*) AS n FROM message "
        "GROUP BY stream_id, platform_message_id HAVING n > 1"
    )
    for row in rows_doubled:
        problems["a message row is doubled"].append(f"{row['platform_message_id']}x{row['n']}")
    for raised in _tracebacks(log):
        if not any(ok in raised for ok in HARMLESS_TRACEBACKS):
            problems["the bot log has a Traceback"].append(raised[:160])


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


def ledger_stats(ledger: Ledger, ats: list[sqlite3.Row], sent: Counter[str]) -> dict[str, Any]:
    """Counts from the ledger, in the order the stats print them."""
    recovered = Counter(e["reason"] for e in ledger.events if e["kind"] == "delivery_recovered")
    return {
        "stored_member_messages": sum(1 for m in ledger.messages if not m["from_bot"]),
        "stored_ats": len(ats),
        "turns": len(ledger.turns),
        "outbox": dict(Counter(row["status"] for row in ledger.outbox)),
        "sends": sum(sent.values()),
        "delivery_recovered": dict(recovered),
    }
