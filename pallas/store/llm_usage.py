"""Model-call accounting: one row per attempt, and the cost report over a time range.

Rows are written in batches and never on the caller's latency path: a model call waits for
the model, not for the database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from loguru import logger
from sqlalchemy import Select, case, func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.database import Database
from pallas.store.models import LlmCall, Stream

MAX_ERROR_CHARS = 500


@dataclass(frozen=True)
class LlmCallRow:
    created_at: datetime
    purpose: str
    model_type: str
    model: str
    upstream_model: str
    provider: str
    outcome: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    usage_estimated: bool = False
    cost: float = 0.0
    latency_ms: float = 0.0
    stream_id: int | None = None
    turn_id: int | None = None
    error: str = ""
    attempt: int = 1


class LlmUsageWriter:
    """Buffers rows for `linger_s` and commits them together.

    Accounting is never urgent, and a model call must not pay for a transaction: `record`
    only appends to a list. A batch whose commit fails is retried row by row, so one bad row
    cannot take its neighbours down with it; a row that still fails is logged as lost.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        linger_s: float = 0.5,
    ) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()
        self._linger_s = linger_s
        self._buffer: list[LlmCallRow] = []
        self._timer: asyncio.TimerHandle | None = None
        self._commits: set[asyncio.Task[None]] = set()
        self._running = False

    def start(self) -> None:
        self._running = True

    async def close(self) -> None:
        """Commit everything recorded so far, then refuse more."""
        await self.flush()
        self._running = False

    def record(self, row: LlmCallRow) -> None:
        if not self._running:
            logger.warning(
                "llm usage row dropped, writer not running: {} {}", row.model, row.purpose
            )
            return
        self._buffer.append(row)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._linger_s, self._commit_now)

    async def flush(self) -> None:
        """Commit what is buffered now and wait for every commit in flight."""
        self._commit_now()
        while self._commits:
            await asyncio.gather(*list(self._commits), return_exceptions=True)

    def _commit_now(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._buffer:
            return
        rows, self._buffer = self._buffer, []
        task = asyncio.create_task(self._commit(rows), name="llm usage commit")
        self._commits.add(task)
        task.add_done_callback(self._commits.discard)

    async def _commit(self, rows: list[LlmCallRow]) -> None:
        try:
            await self._insert(rows)
        except Exception as exc:  # accounting must never take a model call down with it
            if len(rows) == 1:
                logger.opt(exception=exc).error("1 llm usage row lost: {!r}", exc)
                return
            logger.warning(
                "{} llm usage rows failed together ({!r}); retrying one by one", len(rows), exc
            )
            for row in rows:
                await self._commit([row])

    async def _insert(self, rows: list[LlmCallRow]) -> None:
        async with self._writes.begin() as conn:
            await conn.execute(insert(LlmCall), [_values(row) for row in rows])


def _values(row: LlmCallRow) -> dict[str, object]:
    values = dict(row.__dict__)
    values["error"] = row.error[:MAX_ERROR_CHARS]
    return values


@dataclass(frozen=True)
class CostLine:
    key: str
    calls: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost: float


@dataclass(frozen=True)
class CostReport:
    since: datetime
    until: datetime
    by_purpose: tuple[CostLine, ...]
    by_model: tuple[CostLine, ...]
    by_group: tuple[CostLine, ...]  # key "group:<id>", "private:<id>" or "none"

    @property
    def total_cost(self) -> float:
        return sum(line.cost for line in self.by_purpose)


async def cost_report(engine: AsyncEngine, since: datetime, until: datetime) -> CostReport:
    """Cost per purpose, per answering model and per conversation for [since, until)."""
    async with engine.connect() as conn:
        purpose = await conn.execute(_grouped(LlmCall.purpose, since, until))
        model = await conn.execute(_grouped(LlmCall.model, since, until))
        stream_label = func.coalesce(Stream.kind + ":" + Stream.external_id, "none")
        group = await conn.execute(
            _grouped(stream_label, since, until).outerjoin(Stream, Stream.id == LlmCall.stream_id)
        )
        return CostReport(
            since,
            until,
            _lines(purpose.all()),
            _lines(model.all()),
            _lines(group.all()),
        )


def _grouped(key: object, since: datetime, until: datetime) -> Select[tuple[object, ...]]:
    return (
        select(
            key,  # type: ignore[call-overload]
            func.count(),
            func.sum(case((LlmCall.outcome != "ok", 1), else_=0)),
            func.sum(LlmCall.prompt_tokens),
            func.sum(LlmCall.completion_tokens),
            func.sum(LlmCall.cached_tokens),
            func.sum(LlmCall.cost),
        )
        .select_from(LlmCall)
        .where(LlmCall.created_at >= since, LlmCall.created_at < until)
        .group_by(key)  # type: ignore[arg-type]
    )


def _lines(rows: Sequence[object]) -> tuple[CostLine, ...]:
    lines = [
        CostLine(str(k), int(n), int(f or 0), int(p or 0), int(c or 0), int(h or 0), float(x or 0))
        for k, n, f, p, c, h, x in rows  # type: ignore[misc]
    ]
    return tuple(sorted(lines, key=lambda line: (-line.cost, line.key)))


async def chat_usage(engine: AsyncEngine, stream_id: int, since: datetime) -> tuple[int, float]:
    """(calls, cost) of a chat's model calls since `since`."""
    query = select(func.count(), func.coalesce(func.sum(LlmCall.cost), 0.0)).where(
        LlmCall.stream_id == stream_id, LlmCall.created_at >= since
    )
    async with engine.connect() as conn:
        calls, cost = (await conn.execute(query)).one()
    return int(calls), float(cost)


async def turn_spending(engine: AsyncEngine, turn_id: int) -> tuple[int, float]:
    """The model calls a turn made (every attempt counts) and what they cost."""
    query = select(func.count(), func.coalesce(func.sum(LlmCall.cost), 0.0)).where(
        LlmCall.turn_id == turn_id
    )
    async with engine.connect() as conn:
        calls, cost = (await conn.execute(query)).one()
    return int(calls), float(cost)


async def spent_by_part(
    engine: AsyncEngine, since: datetime
) -> dict[str, tuple[float, int]]:
    """(cost, tokens) since `since` by purpose ("purpose:<p>") and by chat ("stream:<id>"):
    where the daily budget's shares start after a restart."""
    cost = func.coalesce(func.sum(LlmCall.cost), 0.0)
    tokens = func.coalesce(func.sum(LlmCall.prompt_tokens + LlmCall.completion_tokens), 0)
    parts: dict[str, tuple[float, int]] = {}
    async with engine.connect() as conn:
        for column, prefix in ((LlmCall.purpose, "purpose"), (LlmCall.stream_id, "stream")):
            query = (
                select(column, cost, tokens)
                .where(LlmCall.created_at >= since, column.is_not(None))
                .group_by(column)
            )
            for key, spent, used in (await conn.execute(query)).all():
                parts[f"{prefix}:{key}"] = (float(spent), int(used))
    return parts


async def spent_since(engine: AsyncEngine, since: datetime) -> tuple[float, int]:
    """(cost, tokens) of every model call since `since`: the daily budget's starting point
    after a restart."""
    query = select(
        func.coalesce(func.sum(LlmCall.cost), 0.0),
        func.coalesce(func.sum(LlmCall.prompt_tokens + LlmCall.completion_tokens), 0),
    ).where(LlmCall.created_at >= since)
    async with engine.connect() as conn:
        cost, tokens = (await conn.execute(query)).one()
    return float(cost), int(tokens)
