"""Bot processes sharing one store, each under a lease it renews (docs/scaling.md).

A process registers its name, renews its lease every few seconds and names itself on what it
claims: the messages it stored (`message.stored_by`), the outbox rows it is sending
(`outbox.holder`), the chats whose turn it runs (`chat_turn`). Those claims are good while
its lease is. Once the lease has expired, another process claims the recovery (one does),
finishes what the dead one left under the crash rules, and marks it recovered; only then do
its chats pass on. A process whose lease was recovered while it was frozen finds out at its
next renewal and must stop.

Every method takes `now`: the store never reads the wall clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.orm import aliased

from pallas.store.database import Database
from pallas.store.models import BotProcess, ChatTurn, IdBlock, Message, OutboxItem
from pallas.store.outbox import OutboxStatus
from pallas.store.sql import insert_ignoring_conflicts

MAX_NAME_CHARS = 64
UNNAMED = "(before names)"  # the row that says who took the unnamed leftovers
# What running processes claim in one store: never exported, and no reason to call a store
# holding them not empty (pallas/store/export.py, restore.py).
RUNTIME_TABLES = frozenset({"bot_process", "chat_turn"})


@dataclass(frozen=True)
class ProcessRow:
    name: str
    run_id: str
    heartbeat_at: datetime
    expires_at: datetime
    accounts: tuple[str, ...]
    recovered_by: str | None
    recovered_at: datetime | None

    def alive(self, now: datetime) -> bool:
        return self.recovered_at is None and self.expires_at > now


@dataclass(frozen=True)
class Processes:
    """The process table as one read saw it."""

    rows: tuple[ProcessRow, ...]
    now: datetime

    def alive(self, name: str) -> bool:
        return any(row.name == name and row.alive(self.now) for row in self.rows)

    def connected_accounts(self) -> frozenset[str]:
        """Accounts connected to some live process."""
        return frozenset(a for row in self.rows if row.alive(self.now) for a in row.accounts)


@dataclass(frozen=True)
class Owners:
    """Whose messages a recovery looks at: everyone's (`names` None: the process is alone on
    its store), or those stored by these processes (and, with `unnamed`, rows stored
    before processes had names)."""

    names: frozenset[str] | None = None
    unnamed: bool = False

    def clause(self) -> ColumnElement[bool] | None:
        if self.names is None:
            return None
        named = Message.stored_by.in_(sorted(self.names))
        return or_(named, Message.stored_by.is_(None)) if self.unnamed else named

    def holds(self, stored_by: str | None) -> bool:
        if self.names is None:
            return True
        return stored_by in self.names if stored_by is not None else self.unnamed


EVERYONE = Owners()


_ROWS = select(
    BotProcess.name, BotProcess.run_id, BotProcess.heartbeat_at, BotProcess.expires_at,
    BotProcess.accounts, BotProcess.recovered_by, BotProcess.recovered_at,
)  # fmt: skip


def _row(r: Any) -> ProcessRow:
    return ProcessRow(
        str(r.name), str(r.run_id), r.heartbeat_at, r.expires_at, tuple(r.accounts or ()),
        r.recovered_by, r.recovered_at,
    )  # fmt: skip


class ProcessStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()

    async def read(self, now: datetime) -> Processes:
        async with self._engine.connect() as conn:
            rows = (await conn.execute(_ROWS.order_by(BotProcess.name))).all()
        return Processes(tuple(_row(r) for r in rows), now)

    async def find(self, name: str) -> ProcessRow | None:
        async with self._engine.connect() as conn:
            found = (await conn.execute(_ROWS.where(BotProcess.name == name))).first()
        return _row(found) if found is not None else None

    async def register(self, name: str, run_id: str, now: datetime, lease: timedelta) -> bool:
        """This run holds the name from now: a fresh lease, nothing recovered. False while
        another process is taking the name's last run over: its leftovers are that
        process's until it is done (the caller waits and asks again)."""
        values = {
            "run_id": run_id, "started_at": now, "heartbeat_at": now,
            "expires_at": now + lease, "accounts": [], "recovered_by": None,
            "recovered_at": None,
        }  # fmt: skip
        async with self._writes.begin() as conn:
            await conn.execute(
                insert_ignoring_conflicts(conn, BotProcess.__table__),  # type: ignore[arg-type]
                [{"name": name, **values}],
            )
            taken = await conn.execute(
                update(BotProcess)
                .where(BotProcess.name == name, _not_being_recovered(now))
                .values(values)
            )
            return taken.rowcount == 1

    async def renew(
        self,
        name: str,
        run_id: str,
        now: datetime,
        lease: timedelta,
        accounts: tuple[str, ...],
    ) -> bool:
        """Push the lease on; False when it is no longer this run's (recovered by another
        process while this one was frozen, or the name taken by another run)."""
        statement = (
            update(BotProcess)
            .where(
                BotProcess.name == name,
                BotProcess.run_id == run_id,
                BotProcess.recovered_by.is_(None),
            )
            .values(heartbeat_at=now, expires_at=now + lease, accounts=sorted(accounts))
        )
        async with self._writes.begin() as conn:
            return (await conn.execute(statement)).rowcount == 1

    async def leave(self, name: str, run_id: str, now: datetime) -> None:
        """A clean stop: the lease ends now, so what the process leaves behind (messages
        still buffered) is recovered at once, by its next run or by another process."""
        statement = (
            update(BotProcess)
            .where(BotProcess.name == name, BotProcess.run_id == run_id)
            .values(expires_at=now, accounts=[])
        )
        async with self._writes.begin() as conn:
            await conn.execute(statement)

    async def claim_recovery(
        self, name: str, recoverer: str, now: datetime, *, from_: str | None = None
    ) -> bool:
        """Take the recovery of a process whose lease expired; one taker wins. `from_`: the
        process that had taken it and died in the middle (its own lease expired too)."""
        # A takeover whose taker died passes on only once the taker itself was recovered: a
        # taker merely paused would otherwise wake to finish it beside its successor.
        taker = aliased(BotProcess)
        taker_recovered = exists().where(taker.name == from_, taker.recovered_at.is_not(None))
        claimed_by = (
            BotProcess.recovered_by.is_(None) if from_ is None
            else (BotProcess.recovered_by == from_) & BotProcess.recovered_at.is_(None)
            & taker_recovered
        )  # fmt: skip
        statement = (
            update(BotProcess)
            .where(
                BotProcess.name == name,
                BotProcess.name != recoverer,
                BotProcess.expires_at <= now,
                claimed_by,
            )
            .values(recovered_by=recoverer)
        )
        async with self._writes.begin() as conn:
            return (await conn.execute(statement)).rowcount == 1

    async def adopt_messages(self, dead: str, heir: str, since: datetime) -> int:
        """The dead process's recent messages no turn holds are the heir's from now (its
        buffers hold them, or a retry owed to them is the heir's to run). Runs once per
        takeover: a scan of the day's timeline, no index of its own on the hot path."""
        statement = (
            update(Message)
            .where(
                Message.stored_by == dead,
                Message.stored_at >= since,
                Message.turn_id.is_(None),
            )
            .values(stored_by=heir)
        )
        async with self._writes.begin() as conn:
            return (await conn.execute(statement)).rowcount or 0

    async def recovered(self, name: str, recoverer: str, now: datetime) -> None:
        """The dead process's leftovers are finished: its chats pass on."""
        async with self._writes.begin() as conn:
            marked = await conn.execute(
                update(BotProcess)
                .where(BotProcess.name == name, BotProcess.recovered_by == recoverer)
                .values(recovered_at=now)
            )
            if marked.rowcount == 1:  # still this recoverer's: the name was not taken again
                await conn.execute(
                    update(ChatTurn).where(ChatTurn.holder == name).values(holder=None)
                )

    async def claim_unnamed(self, claimer: str, since: datetime, now: datetime) -> int:
        """Take the leftovers of the time before processes had names (rows stored before
        0026, or imported from an archive): the first process to ask names itself on the
        recent ones, so that they are its own from then on, across its restarts and a
        takeover. How many messages it took (0 for every later process)."""
        row = {
            "name": UNNAMED, "run_id": "", "started_at": now, "heartbeat_at": now,
            "expires_at": now, "accounts": [], "recovered_by": claimer, "recovered_at": now,
        }  # fmt: skip
        async with self._writes.begin() as conn:
            inserted = await conn.execute(
                insert_ignoring_conflicts(conn, BotProcess.__table__)  # type: ignore[arg-type]
                .values(row)
                .returning(BotProcess.name)
            )
            if inserted.first() is None:
                return 0
            await conn.execute(
                update(OutboxItem)
                .where(OutboxItem.status == OutboxStatus.SENDING.value, OutboxItem.holder.is_(None))
                .values(holder=claimer)
            )
            taken = await conn.execute(
                update(Message)
                .where(Message.stored_by.is_(None), Message.stored_at >= since)
                .values(stored_by=claimer)
            )
            return taken.rowcount or 0


def _not_being_recovered(now: datetime) -> ColumnElement[bool]:
    """Nobody is taking the row's last run over, or the one who was died doing it (then
    the name's next run recovers its own leftovers)."""
    taker = aliased(BotProcess)
    taker_alive = exists().where(
        taker.name == BotProcess.recovered_by,
        taker.recovered_at.is_(None),
        taker.expires_at > now,
    )
    return BotProcess.recovered_by.is_(None) | BotProcess.recovered_at.is_not(None) | ~taker_alive


def _free_for(holder: str) -> ColumnElement[bool]:
    """The chat's turn may be taken by `holder`: nobody holds it, it does, or its holder
    was recovered (or never registered)."""
    live_other = exists().where(
        BotProcess.name == ChatTurn.holder, BotProcess.recovered_at.is_(None)
    )
    return or_(ChatTurn.holder.is_(None), ChatTurn.holder == holder, ~live_other)


class ChatTurns:
    """One turn at a time per chat across processes (the `chat_turn` rows)."""

    def __init__(self, engine: AsyncEngine, holder: str) -> None:
        self._writes = Database.of(engine).writes()
        self.holder = holder

    async def take(self, stream_id: int, now: datetime) -> bool:
        async with self._writes.begin() as conn:
            return await _take(conn, stream_id, self.holder, now)

    async def release(self, stream_id: int) -> None:
        statement = (
            update(ChatTurn)
            .where(ChatTurn.stream_id == stream_id, ChatTurn.holder == self.holder)
            .values(holder=None)
        )
        async with self._writes.begin() as conn:
            await conn.execute(statement)


async def _take(conn: AsyncConnection, stream_id: int, holder: str, now: datetime) -> bool:
    row = {"stream_id": stream_id, "holder": holder, "taken_at": now}
    inserted = await conn.execute(
        insert_ignoring_conflicts(conn, ChatTurn.__table__)  # type: ignore[arg-type]
        .values(row)
        .returning(ChatTurn.stream_id)
    )
    if inserted.first() is not None:
        return True
    # Row-locked on PostgreSQL: of two takers the second re-reads the first's holder.
    taken = await conn.execute(
        update(ChatTurn)
        .where(and_(ChatTurn.stream_id == stream_id, _free_for(holder)))
        .values(holder=holder, taken_at=now)
    )
    return taken.rowcount == 1


class IdBlocks:
    """Numbers unique across processes, handed out in blocks (one write per block)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._writes = Database.of(engine).writes()

    async def take(self, name: str, size: int, at_least: int = 0) -> range:
        """The next `size` numbers of the counter, all above `at_least`."""
        async with self._writes.begin() as conn:
            await conn.execute(
                insert_ignoring_conflicts(conn, IdBlock.__table__),  # type: ignore[arg-type]
                [{"name": name, "last": at_least}],
            )
            current = (
                await conn.execute(
                    select(IdBlock.last).where(IdBlock.name == name).with_for_update()
                )
            ).scalar_one()
            start = max(int(current), at_least) + 1
            await conn.execute(
                update(IdBlock).where(IdBlock.name == name).values(last=start + size - 1)
            )
        return range(start, start + size)
