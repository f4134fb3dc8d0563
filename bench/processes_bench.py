"""Processes benchmark: the real bot's ingress on PostgreSQL, one process against two sharing it.

Two scenarios per round, each on a fresh database of one PostgreSQL server (a throwaway one
started from the local binaries as the store tests do, tests/support/postgres.py, or the one
at PALLAS_TEST_POSTGRES_URL). "one": one bot process (bench/run_pallas.py with the bench probe,
PALLAS_PROCESS_NAME bench-1) and one NapCat-like client, account A, sending to all 20 groups.
"two": two processes (bench-1, then bench-2 once the first is ready: the first migrates) and
two clients at once, account A on bench-1 sending to groups 1-10 and account B on bench-2 to
groups 11-20, each half of every phase at half the rate, so the total load is the same (a
burst's messages go out in turn, one of each client's).

Each scenario sends an untimed warm-up, a burst of `--burst` messages as fast as possible and
a steady stream at `--rate` messages/s for `--seconds`, using bench/ingress_bench.py's clients,
messages, phases and CPU accounting. Per phase it reports messages/s, send -> row committed
p50/p99 (the commit stamp each `bench_ack` carries), send -> ack p99, and the CPU per message
of the bot process trees until they are idle again (both trees summed for "two"), with each of
the two processes apart and the PostgreSQL server's CPU per message when it runs here.
Afterwards it counts the rows of `message` per platform message id: every message sent must be
stored exactly once.

Run from the repository root: `.venv/bin/python bench/processes_bench.py [--rounds 1]
[--burst N] [--rate R] [--seconds S] [--warmup N]`. Exits 1 if a message was lost (no ack, or
not stored exactly once), 2 if no PostgreSQL can run here; the speed figures only print.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import websockets
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.ingress_bench import (  # noqa: E402
    GROUPS,
    PEOPLE,
    SCRIPTS,
    SELF_ID,
    AckClient,
    ChildBot,
    Frame,
    MessageFactory,
    PhaseResult,
    bots_loop,
    fmt,
    median,
    send_steady,
    settle,
    summarize,
    tree_cpu_s,
)
from bench.machine import machine_line  # noqa: E402
from bench.memory_bench import autocommit  # noqa: E402
from pallas.store.engine import create_engine  # noqa: E402
from tests.support.postgres import PostgresServer, postgres_configured  # noqa: E402

PG_ENV = "PALLAS_TEST_POSTGRES_URL"  # an existing server, as for the store tests
GROUP_BASE = 700_000  # MessageFactory's first group id
NAMES = ("bench-1", "bench-2")
PHASES = ("warmup", "burst", "steady")
LABEL_WIDTH = 50


@dataclass(frozen=True)
class Account:
    """One QQ account's client: its self_id, its groups, the first of its message ids."""

    self_id: int
    first_group: int
    groups: int
    first_id: int


SCENARIOS: dict[str, tuple[Account, ...]] = {
    "one": (Account(SELF_ID, 0, GROUPS, 1_000_001),),
    "two": (
        Account(SELF_ID, 0, GROUPS // 2, 1_000_001),
        Account(SELF_ID + 1, GROUPS // 2, GROUPS - GROUPS // 2, 51_000_001),
    ),
}


# Clients --------------------------------------------------------------------------------------


class AccountFactory(MessageFactory):
    """MessageFactory's messages as one account receives them: its self_id, its groups only
    (the group drawn, folded into the account's range), ids from its own range."""

    def __init__(self, account: Account) -> None:
        super().__init__(seed=account.self_id)
        self.account = account
        self._ids = itertools.count(account.first_id)

    def _frame(self, message_id: int) -> Frame:
        _, frame = super()._frame(message_id)
        event = json.loads(frame)
        drawn = event["group_id"] - GROUP_BASE
        event["self_id"] = self.account.self_id
        event["group_id"] = GROUP_BASE + self.account.first_group + drawn % self.account.groups
        return message_id, json.dumps(event, ensure_ascii=False)


class AccountClient(AckClient):
    """AckClient connected as `self_id` (AckClient's own connect is always SELF_ID). NoneBot
    takes the account from the X-Self-ID header; pallas reads no lifecycle event, none is sent."""

    def __init__(self, ws_url: str, self_id: int) -> None:
        super().__init__(ws_url)
        self.self_id = self_id

    async def connect(self) -> AccountClient:
        headers = {"X-Self-ID": str(self.self_id), "X-Client-Role": "Universal"}
        self._ws = await websockets.connect(self.ws_url, additional_headers=headers, max_size=None)
        self._reader = asyncio.create_task(self._read())
        return self


@dataclass
class Bot:
    """One bot process with the client of the account connected to it."""

    proc: ChildBot
    client: AccountClient
    factory: AccountFactory


# PostgreSQL -----------------------------------------------------------------------------------


@dataclass
class Server:
    admin: AsyncEngine
    admin_url: str
    version: str
    postmaster: int | None  # its pid when it runs on this machine (its CPU is then measured)
    where: str


def parent_pid(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = (line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))
    return int(next(found, "0")) or None


def is_postgres(pid: int | None) -> bool:
    try:
        return pid is not None and Path(f"/proc/{pid}/comm").read_text().strip() == "postgres"
    except OSError:
        return False


async def describe(admin_url: str, where: str) -> Server:
    """The server's version, and its postmaster's pid: the parent of our backend."""
    admin = create_engine(admin_url)
    version = str((await autocommit(admin, "SHOW server_version"))[0][0])
    backend = int((await autocommit(admin, "SELECT pg_backend_pid()"))[0][0])
    postmaster = parent_pid(backend) if is_postgres(backend) else None
    return Server(admin, admin_url, version, postmaster if is_postgres(postmaster) else None, where)


@asynccontextmanager
async def postgres_server() -> AsyncIterator[Server]:
    configured = os.environ.get(PG_ENV)
    local = None if configured else PostgresServer().start()
    url = configured or (local.admin_url if local else "")
    url = make_url(url).set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)
    try:
        server = await describe(url, f"${PG_ENV}" if configured else "throwaway, fsync=off")
        try:
            yield server
        finally:
            await server.admin.dispose()
    finally:
        if local is not None:
            local.stop()


@asynccontextmanager
async def database(server: Server, name: str) -> AsyncIterator[str]:
    """A fresh database on the server, dropped afterwards."""
    await autocommit(server.admin, f'CREATE DATABASE "{name}"')
    try:
        yield make_url(server.admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        await autocommit(server.admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def server_cpu_s(server: Server) -> float:
    return math.nan if server.postmaster is None else tree_cpu_s(server.postmaster)


async def stored_rows(url: str) -> dict[str, int]:
    """Rows of `message` per platform message id."""
    engine = create_engine(url)
    query = "SELECT platform_message_id, count(*) FROM message GROUP BY platform_message_id"
    try:
        async with engine.connect() as conn:
            return {str(pid): int(n) for pid, n in await conn.execute(text(query))}
    finally:
        await engine.dispose()


# Phases ---------------------------------------------------------------------------------------


@dataclass
class View:
    """What one table column shows of a phase."""

    result: PhaseResult
    server_cpu_us: float  # the PostgreSQL server's CPU per message; NaN per process


@dataclass
class Phase:
    combined: PhaseResult  # every client's messages; CPU: all bot trees summed
    parts: list[PhaseResult]  # per process: its client's messages, its own tree's CPU
    server_cpu_s: float

    def view(self, part: int | None) -> View | None:
        if part is None:
            sent = self.combined.sent
            return View(self.combined, self.server_cpu_s / sent * 1e6 if sent else math.nan)
        return View(self.parts[part], math.nan) if part < len(self.parts) else None


def split(total: int, ways: int) -> list[int]:
    return [total // ways + (i < total % ways) for i in range(ways)]


async def send_interleaved(pairs: Sequence[tuple[Bot, list[Frame]]]) -> list[float]:
    """A burst from every client at once: their messages in turn, one of each client's."""
    for frames in itertools.zip_longest(*(own for _, own in pairs)):
        for (bot, _), frame in zip(pairs, frames, strict=True):
            if frame is not None:
                await bot.client.send(*frame)
    return [0.0] * len(pairs)


async def send_steadily(
    pairs: Sequence[tuple[Bot, list[Frame]]], total: int, rate: float
) -> list[float]:
    """Every client on its own schedule at once; the lateness of each against it."""
    sends = (send_steady(bot.client, own, rate * len(own) / max(total, 1)) for bot, own in pairs)
    return list(await asyncio.gather(*sends))


async def send_all(
    pairs: Sequence[tuple[Bot, list[Frame]]], total: int, rate: float | None
) -> list[float]:
    """Every client sends its messages (a burst, or steadily at its share of `rate`), then
    waits for their acks; the lateness of each against its schedule."""
    for bot, own in pairs:
        bot.client.expect(mid for mid, _ in own)
    if rate is None:
        lags = await send_interleaved(pairs)
    else:
        lags = await send_steadily(pairs, total, rate)
    await asyncio.gather(*(bot.client.wait_acks() for bot, _ in pairs))
    return lags


async def run_split(bots: Sequence[Bot], total: int, rate: float | None, server: Server) -> Phase:
    """`total` messages split between the clients, all sending at once (a burst, or each at its
    share of `rate`); CPU from just before the first send until every bot tree is idle."""
    frames = [bot.factory.frames(n) for bot, n in zip(bots, split(total, len(bots)), strict=True)]
    pairs = list(zip(bots, frames, strict=True))
    server_before = server_cpu_s(server)
    before = [tree_cpu_s(bot.proc.pid) for bot in bots]
    lags = await send_all(pairs, total, rate)
    settled = await asyncio.gather(*(settle(bot.proc.pid) for bot in bots))
    server_used = server_cpu_s(server) - server_before
    parts = [summarize(bot.client, own, lag) for (bot, own), lag in zip(pairs, lags, strict=True)]
    for part, cpu_before, (cpu_after, idle_after) in zip(parts, before, settled, strict=True):
        part.cpu_s, part.idle_after_s = cpu_after - cpu_before, idle_after
    return Phase(combine(bots, frames, parts, lags), parts, server_used)


def combine(
    bots: Sequence[Bot],
    frames: Sequence[Sequence[Frame]],
    parts: Sequence[PhaseResult],
    lags: Sequence[float],
) -> PhaseResult:
    """One phase over every client: their stamps merged, frames in the order they were sent."""
    merged = AckClient("")
    for bot in bots:
        merged.sent.update(bot.client.sent)
        merged.acked.update(bot.client.acked)
        merged.committed.update(bot.client.committed)
    ordered = sorted(itertools.chain(*frames), key=lambda frame: merged.sent[frame[0]])
    result = summarize(merged, ordered, max(lags, default=0.0))
    result.cpu_s = sum(part.cpu_s for part in parts)
    result.idle_after_s = max(part.idle_after_s for part in parts)
    return result


# Scenarios ------------------------------------------------------------------------------------


@dataclass
class ScenarioRun:
    name: str  # "one" or "two"
    round: int
    phases: dict[str, Phase]
    sent_ids: list[list[int]]  # per process
    duplicate_acks: int
    exit_codes: list[int | None] = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)
    stored: dict[str, int] = field(default_factory=dict)  # platform message id -> rows

    def lost(self, ids: Sequence[int] | None = None) -> int:
        ids = ids if ids is not None else [m for own in self.sent_ids for m in own]
        return sum(1 for m in ids if str(m) not in self.stored)

    @property
    def doubled(self) -> int:
        return sum(1 for own in self.sent_ids for m in own if self.stored.get(str(m), 0) > 1)

    @property
    def acks_missing(self) -> int:
        return sum(p.combined.sent - p.combined.acked for p in self.phases.values())

    @property
    def stamps_missing(self) -> int:
        return sum(p.combined.sent - p.combined.stamped for p in self.phases.values())

    @property
    def failed(self) -> bool:
        return self.lost() > 0 or self.doubled > 0 or self.acks_missing > 0


async def connect_bots(procs: Sequence[ChildBot], accounts: Sequence[Account]) -> list[Bot]:
    bots: list[Bot] = []
    for proc, account in zip(procs, accounts, strict=True):
        client = await AccountClient(proc.ws_url, account.self_id).connect()
        bots.append(Bot(proc, client, AccountFactory(account)))
    return bots


async def drive(
    name: str, round_no: int, procs: Sequence[ChildBot], server: Server, args: argparse.Namespace
) -> ScenarioRun:
    bots = await connect_bots(procs, SCENARIOS[name])
    try:
        phases = {
            "warmup": await run_split(bots, args.warmup, None, server),
            "burst": await run_split(bots, args.burst, None, server),
            "steady": await run_split(bots, round(args.rate * args.seconds), args.rate, server),
        }
    finally:
        for bot in bots:
            await bot.client.close()
    ids = [bot.factory.sent_ids for bot in bots]
    return ScenarioRun(name, round_no, phases, ids, sum(b.client.duplicate_acks for b in bots))


def child(workdir: Path, name: str, url: str) -> ChildBot:
    env = {"LOG_LEVEL": "WARNING", "PALLAS_DATABASE_URL": url, "PALLAS_PROCESS_NAME": name}
    return ChildBot(workdir / name, env=env, script=SCRIPTS["pallas"], pacing=None)


async def run_processes(
    name: str, round_no: int, procs: Sequence[ChildBot], server: Server, args: argparse.Namespace
) -> ScenarioRun:
    try:
        for proc in procs:  # one after the other: the first migrates the fresh database
            proc.start()
            await proc.wait_ready()
        marks = [len(proc.log()) for proc in procs]
        run = await drive(name, round_no, procs, server, args)
    finally:
        exit_codes = [proc.stop() for proc in procs]
    run.exit_codes = exit_codes
    # Only what was logged from readiness on: start-up notices are not the benchmark's.
    run.log_lines = [
        f"{proc.workdir.name}: {line}"
        for proc, mark in zip(procs, marks, strict=True)
        for line in proc.log()[mark:].splitlines()
        if line.strip()
    ]
    return run


async def run_scenario(
    name: str, round_no: int, server: Server, args: argparse.Namespace
) -> ScenarioRun:
    """A fresh database, fresh processes on fresh data dirs; the rows counted at the end."""
    async with database(server, f"pallas_processes_{os.getpid()}_{name}_{round_no}") as url:
        with tempfile.TemporaryDirectory(prefix=f"pallas-processes-{name}-") as tmp:
            procs = [child(Path(tmp), n, url) for n in NAMES[: len(SCENARIOS[name])]]
            run = await run_processes(name, round_no, procs, server, args)
        run.stored = await stored_rows(url)
    return run


Rounds = list[dict[str, ScenarioRun]]


async def run_rounds(args: argparse.Namespace, server: Server) -> Rounds:
    """Both scenarios per round; which goes first alternates."""
    rounds: Rounds = []
    for number in range(1, args.rounds + 1):
        order = ("one", "two") if number % 2 == 1 else ("two", "one")
        rounds.append({name: await run_scenario(name, number, server, args) for name in order})
        report_round(number, order, rounds[-1])
    return rounds


# Report ---------------------------------------------------------------------------------------

# (phase, what, value of a column's view)
MEASURES: list[tuple[str, str, Callable[[View], float]]] = [
    ("burst", "msgs/s (first send -> last ack)", lambda v: v.result.messages_per_s),
    ("burst", "rows/s (first send -> last commit)", lambda v: v.result.commits_per_s),
    ("burst", "send -> row committed p50 ms", lambda v: v.result.commit_p50_ms),
    ("burst", "send -> row committed p99 ms", lambda v: v.result.commit_p99_ms),
    ("burst", "send -> ack p99 ms", lambda v: v.result.ack_p99_ms),
    ("burst", "CPU per msg µs (bot process trees)", lambda v: v.result.cpu_per_message_us),
    ("burst", "CPU per msg µs (PostgreSQL server)", lambda v: v.server_cpu_us),
    ("burst", "idle again after last ack, s", lambda v: v.result.idle_after_s),
    ("steady", "send -> row committed p50 ms", lambda v: v.result.commit_p50_ms),
    ("steady", "send -> row committed p99 ms", lambda v: v.result.commit_p99_ms),
    ("steady", "send -> ack p99 ms", lambda v: v.result.ack_p99_ms),
    ("steady", "client's worst lateness ms", lambda v: v.result.max_send_lag_ms),
    ("steady", "CPU per msg µs (bot process trees)", lambda v: v.result.cpu_per_message_us),
    ("steady", "CPU per msg µs (PostgreSQL server)", lambda v: v.server_cpu_us),
]
# (header, scenario, process index or None for all of the scenario's processes)
COLUMNS: list[tuple[str, str, int | None]] = [
    ("one", "one", None),
    ("two", "two", None),
    ("two:" + NAMES[0], "two", 0),
    ("two:" + NAMES[1], "two", 1),
]


def value(runs: dict[str, ScenarioRun], scenario: str, part: int | None, measure: int) -> float:
    phase, _, get = MEASURES[measure]
    view = runs[scenario].phases[phase].view(part)
    return math.nan if view is None else get(view)


def table(cell: Callable[[str, int | None, int], float]) -> None:
    print(f"  {'':{LABEL_WIDTH}}" + "".join(f"{header:>14}" for header, _, _ in COLUMNS))
    for index, (phase, what, _) in enumerate(MEASURES):
        digits = 2 if what.endswith(", s") else 1
        cells = "".join(f"{fmt(cell(s, p, index), digits):>14}" for _, s, p in COLUMNS)
        print(f"  {phase + ' ' + what:{LABEL_WIDTH}}{cells}")


def report_round(number: int, order: Sequence[str], runs: dict[str, ScenarioRun]) -> None:
    print(f"\nround {number} ({order[0]} first)")
    table(lambda scenario, part, measure: value(runs, scenario, part, measure))
    for name in ("one", "two"):
        print(f"  {checks_line(runs[name])}")
        for line in runs[name].log_lines[:5]:
            print(f"  [{name} log] {line}")


def checks_line(run: ScenarioRun) -> str:
    sent = sum(len(own) for own in run.sent_ids)
    per = ", ".join(
        f"{NAMES[i]} {len(own)} sent, {run.lost(own)} lost" for i, own in enumerate(run.sent_ids)
    )
    return (
        f"{run.name}: {sent} sent ({per}), {run.acks_missing} acks missing, "
        f"{run.stamps_missing} commit stamps missing, {sum(run.stored.values())} rows in "
        f"`message`, {run.lost()} lost, {run.doubled} stored twice or more, "
        f"{run.duplicate_acks} duplicate acks, {len(run.log_lines)} log lines after start-up, "
        f"exit {'/'.join(str(code) for code in run.exit_codes)}"
    )


def report_medians(rounds: Rounds) -> None:
    print(f"\nmedians over {len(rounds)} rounds")
    table(lambda s, p, m: median(value(runs, s, p, m) for runs in rounds))


def report_header(args: argparse.Namespace, server: Server) -> None:
    print(
        f"processes benchmark  {args.rounds} round(s), each: one pallas process, and two sharing "
        f"the store (which goes first alternates), each scenario on a fresh database; "
        f"PostgreSQL {server.version} ({server.where}); {PEOPLE} people in {GROUPS} groups; "
        f"warm-up {args.warmup} msgs (untimed), burst {args.burst} msgs as fast as possible, "
        f"steady {fmt(args.rate, 0)} msg/s for {fmt(args.seconds, 0)} s"
    )
    print(
        f"  two: {NAMES[0]} with account A (groups 1-{GROUPS // 2}), {NAMES[1]} with account B "
        f"(groups {GROUPS // 2 + 1}-{GROUPS}), each client half of every phase at half the "
        "rate, both at once (a burst in turn); columns two:<name> are one process, its "
        "client's messages. Row committed: the transaction that inserted the row returned "
        "(bench/run_pallas.py's stamp). CPU: user + system time of the bot process trees "
        "(summed), from just before the first send until each is idle again, per message; "
        "the PostgreSQL server's tree apart (when it runs here)."
    )


def report_losses(rounds: Rounds) -> bool:
    failed = [run for runs in rounds for run in runs.values() if run.failed]
    where = ", ".join(f"{run.name} round {run.round}" for run in failed)
    print(f"\nmessages lost: {'YES (' + where + ')' if failed else 'none'}")
    return bool(failed)


# Entry ----------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="rounds, each runs both scenarios")
    parser.add_argument("--burst", type=int, default=3000, help="burst messages, all clients")
    parser.add_argument("--rate", type=float, default=200.0, help="steady msgs/s, all clients")
    parser.add_argument("--seconds", type=float, default=10.0, help="steady phase length (s)")
    parser.add_argument("--warmup", type=int, default=100, help="untimed warm-up messages")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.burst < 2 or min(args.rate, args.seconds) <= 0 or args.warmup < 0:
        parser.error("need --rounds >= 1, --burst >= 2, --rate and --seconds > 0, --warmup >= 0")
    return args


async def amain(args: argparse.Namespace) -> int:
    print(machine_line("at start", bots_loop()))
    async with postgres_server() as server:
        report_header(args, server)
        rounds = await run_rounds(args, server)
    if len(rounds) > 1:
        report_medians(rounds)
    lost = report_losses(rounds)
    print(machine_line("at end", bots_loop()))
    return 1 if lost else 0


def main() -> None:
    args = parse_args()
    if not postgres_configured():
        print(f"processes benchmark: no PostgreSQL here (no server binaries, no ${PG_ENV})")
        sys.exit(2)
    sys.exit(asyncio.run(amain(args)))


if __name__ == "__main__":
    main()
