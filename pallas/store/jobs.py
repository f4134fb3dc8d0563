"""The durable job table: work done off a turn's path, claimed under a lease, retried.

    pending --(claim)--> running --(finish)--> done
       ^                   |  |
       +------(retry)------+  +--(fail, or lease expired with no attempt left)--> failed
                           |
       running, lease expired (holder died) --(claim by anyone)--> running

A job is running only under a lease: `lease_holder` (one worker process) until
`lease_expires_at`. Only the holder may settle it; once the lease has expired any worker may
claim it again. Every method takes `now`: the store never reads the wall clock.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from loguru import logger
from sqlalchemy import (
    Integer,
    String,
    bindparam,
    case,
    cast,
    delete,
    func,
    literal,
    null,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.database import Database
from pallas.store.models import Job, UtcDateTime

MAX_ERROR_CHARS = 300
MAX_KIND_CHARS = 64
MAX_KEY_CHARS = 200
MAX_HOLDER_CHARS = 64


class JobStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


OPEN = (JobStatus.PENDING.value, JobStatus.RUNNING.value)


@dataclass(frozen=True)
class JobRef:
    id: int
    created: bool  # False: a job with the same key already existed; this is its id


@dataclass(frozen=True)
class ClaimedJob:
    id: int
    kind: str
    payload: dict[str, Any]
    key: str | None
    attempts: int  # this run included
    max_attempts: int
    due_at: datetime


@dataclass(frozen=True)
class JobRow:
    id: int
    kind: str
    payload: dict[str, Any]
    key: str | None
    status: str
    due_at: datetime
    lease_holder: str | None
    lease_expires_at: datetime | None
    attempts: int
    max_attempts: int
    last_error: str
    created_at: datetime
    updated_at: datetime


_JOB = Job.__table__
_C = _JOB.c
_INSERTS = {"sqlite": sqlite_insert, "postgresql": pg_insert}
_RUNNING, _PENDING = JobStatus.RUNNING.value, JobStatus.PENDING.value

# The statements are built once: building SQLAlchemy statements per call cost more than
# running them. Parameters: now, holder, expires (the new lease's end), limit, job_id...
_NOW = bindparam("now", type_=UtcDateTime())
_LIMIT = bindparam("limit", type_=Integer())
_EXPIRED = (_C.status == _RUNNING) & (_C.lease_expires_at < _NOW)
_DUE = (_C.status == _PENDING) & (_C.due_at <= _NOW)
# Evaluated on the row as it was before the claim (SET expressions all see the old row).
_EXHAUSTED = (_C.status == _RUNNING) & (_C.attempts >= _C.max_attempts)


def _oldest(where: Any, name: str) -> Any:
    """The oldest rows matching `where`. On PostgreSQL rows another claimer has locked are
    skipped, so concurrent claimers never take the same job (SQLite has one writer at a time
    anyway, and its compiler leaves the clause out)."""
    return (
        select(_C.id, _C.due_at)
        .where(where)
        .order_by(_C.due_at, _C.id)
        .limit(_LIMIT)
        .with_for_update(skip_locked=True)
        .subquery(name)
    )


def _claimable() -> Any:
    """The ids to claim: expired leases and due pending jobs, oldest due first. Two limited
    index searches rather than one OR, which would sort every due row on each claim."""
    expired, due = _oldest(_EXPIRED, "expired"), _oldest(_DUE, "due")
    both = union_all(select(expired.c.id, expired.c.due_at), select(due.c.id, due.c.due_at))
    candidates = both.subquery("candidates")
    return (
        select(candidates.c.id)
        .order_by(candidates.c.due_at, candidates.c.id)
        .limit(_LIMIT)
        .scalar_subquery()
    )


def _unless_exhausted(value: Any, exhausted: Any) -> Any:
    return case((_EXHAUSTED, exhausted), else_=value)


# One statement: the job whose lease expired with no attempt left is failed, not claimed.
_CLAIM = (
    update(_JOB)
    # Only the ids: repeating the conditions here makes SQLite scan every due row.
    .where(_C.id.in_(_claimable()))
    .values(
        status=_unless_exhausted(literal(_RUNNING), literal(JobStatus.FAILED.value)),
        lease_holder=_unless_exhausted(bindparam("holder", type_=String()), _C.lease_holder),
        lease_expires_at=_unless_exhausted(bindparam("expires", type_=UtcDateTime()), null()),
        attempts=_unless_exhausted(_C.attempts + 1, _C.attempts),
        last_error=_unless_exhausted(
            _C.last_error,
            literal("lease expired after ") + cast(_C.attempts, String) + " attempts",
        ),
        updated_at=_NOW,
    )
    .returning(
        _C.id,
        _C.kind,
        _C.payload,
        _C.idempotency_key,
        _C.status,
        _C.attempts,
        _C.max_attempts,
        _C.due_at,
    )
)
# Only while the job is running under the caller's lease: once another worker has re-claimed
# it, the old holder's word no longer counts.
_HELD = update(_JOB).where(
    _C.id == bindparam("job_id"), _C.status == _RUNNING, _C.lease_holder == bindparam("holder")
)
_ERROR = bindparam("error", type_=String())
_FINISH = _HELD.values(status=JobStatus.DONE.value, lease_expires_at=None, updated_at=_NOW)
_RETRY = _HELD.values(
    status=_PENDING,
    due_at=bindparam("due", type_=UtcDateTime()),
    last_error=_ERROR,
    lease_expires_at=None,
    updated_at=_NOW,
)
_FAIL = _HELD.values(
    status=JobStatus.FAILED.value, last_error=_ERROR, lease_expires_at=None, updated_at=_NOW
)
_FINISH_MANY = (
    update(_JOB)
    .where(_C.status == _RUNNING, _C.lease_holder == bindparam("holder"))
    .values(status=JobStatus.DONE.value, lease_expires_at=None, updated_at=_NOW)
    .returning(_C.id)
)
_EXTEND = _HELD.values(lease_expires_at=bindparam("expires", type_=UtcDateTime()), updated_at=_NOW)


class JobStore:
    def __init__(self, engine: AsyncEngine) -> None:
        dialect = engine.dialect.name
        if dialect not in _INSERTS:
            raise ValueError(f"jobs: unsupported database backend {dialect!r}")
        self._engine = engine
        self._writes = Database.of(engine).writes()
        self._insert_quietly = _INSERTS[dialect](_JOB).on_conflict_do_nothing(
            index_elements=[_C.idempotency_key]
        )
        self._insert = (
            _INSERTS[dialect](_JOB)
            .on_conflict_do_nothing(index_elements=[_C.idempotency_key])
            .returning(_C.id)
        )

    async def enqueue(
        self,
        kind: str,
        payload: Mapping[str, Any],
        now: datetime,
        *,
        due_at: datetime | None = None,
        key: str | None = None,
        max_attempts: int = 5,
    ) -> JobRef:
        """Add a pending job; with a key already taken, nothing is added (that job's id)."""
        _validate(kind, payload, key, max_attempts)
        if (due_at or now).tzinfo is None:
            raise ValueError("job due time must be an aware UTC datetime")
        values = {
            "kind": kind,
            "payload": dict(payload),
            "idempotency_key": key,
            "status": _PENDING,
            "due_at": due_at or now,
            "attempts": 0,
            "max_attempts": max_attempts,
            "last_error": "",
            "created_at": now,
            "updated_at": now,
        }
        async with self._writes.begin() as conn:
            new_id = (await conn.execute(self._insert, values)).scalar()
            if new_id is not None:
                return JobRef(int(new_id), created=True)
            existing = select(_C.id).where(_C.idempotency_key == key)
            return JobRef(int((await conn.execute(existing)).scalar_one()), created=False)

    async def enqueue_many(
        self, kind: str, items: Sequence[tuple[Mapping[str, Any], str]], now: datetime
    ) -> None:
        """Add pending jobs of one kind, each under its key, in one statement and one
        transaction (a key already taken adds nothing)."""
        for payload, key in items:
            _validate(kind, payload, key, 5)
        if not items:
            return
        rows = [
            {
                "kind": kind,
                "payload": dict(payload),
                "idempotency_key": key,
                "status": _PENDING,
                "due_at": now,
                "attempts": 0,
                "max_attempts": 5,
                "last_error": "",
                "created_at": now,
                "updated_at": now,
            }
            for payload, key in items
        ]
        async with self._writes.begin() as conn:
            await conn.execute(self._insert_quietly, rows)

    async def claim(
        self, holder: str, now: datetime, *, lease: timedelta, limit: int
    ) -> list[ClaimedJob]:
        """Take up to `limit` jobs, oldest due first: pending ones that are due, and running
        ones whose lease expired (their holder died). One of those with no attempt left is
        failed instead (and counts against the limit)."""
        _, claimed = await self.finish_and_claim(holder, now, (), lease=lease, limit=limit)
        return claimed

    async def finish_and_claim(
        self,
        holder: str,
        now: datetime,
        finished: Sequence[int],
        *,
        lease: timedelta,
        limit: int,
    ) -> tuple[list[int], list[ClaimedJob]]:
        """Mark `finished` jobs done (those still held by `holder`) and claim up to `limit`
        more, in one transaction: a worker settles what just ended and takes the next work
        with one commit instead of one per job. Returns (the ids marked done, the claimed)."""
        _validate_holder(holder)
        params = {"now": now, "holder": holder, "expires": now + lease, "limit": limit}
        done: list[int] = []
        async with self._writes.begin() as conn:
            if finished:  # one statement for all of them: a round trip each would add up
                statement = _FINISH_MANY.where(_C.id.in_(list(finished)))
                done = list((await conn.execute(statement, params)).scalars())
            rows = (await conn.execute(_CLAIM, params)).all() if limit > 0 else []
        claimed = []
        for row in rows:
            if row.status == _RUNNING:
                claimed.append(_claimed(row))
            else:
                error = "job {} ({}): lease expired after {} attempts; failed"
                logger.error(error, row.id, row.kind, row.attempts)
        # RETURNING promises no order.
        return done, sorted(claimed, key=lambda job: (job.due_at, job.id))

    async def finish(self, job_id: int, holder: str, now: datetime) -> bool:
        return await self._held(_FINISH, job_id, holder, now)

    async def retry(
        self, job_id: int, holder: str, due_at: datetime, error: str, now: datetime
    ) -> bool:
        """Back to pending, due at `due_at`; the attempts made so far are kept."""
        error = error[:MAX_ERROR_CHARS]
        return await self._held(_RETRY, job_id, holder, now, due=due_at, error=error)

    async def fail(self, job_id: int, holder: str, error: str, now: datetime) -> bool:
        return await self._held(_FAIL, job_id, holder, now, error=error[:MAX_ERROR_CHARS])

    async def extend(self, job_id: int, holder: str, now: datetime, lease: timedelta) -> bool:
        """Push the lease of a job still held by `holder` to `now + lease` (a heartbeat)."""
        return await self._held(_EXTEND, job_id, holder, now, expires=now + lease)

    @property
    def alone(self) -> bool:
        """Whether this process is the store's only one: SQLite, whose file lock refuses a
        second (pallas/store/preflight.py). On PostgreSQL several may share the store."""
        return self._engine.dialect.name == "sqlite"

    async def release_running(self, now: datetime, held_by: str | None = None) -> int:
        """End the leases of every running job (or those whose holder starts with `held_by`):
        they belong to a dead run, the previous one of the process alone on this database
        or one a takeover found (docs/scaling.md). The next claim takes them at once (or
        fails those with no attempt left) instead of waiting out the lease."""
        statement = (
            update(_JOB)
            .where(_C.status == _RUNNING)
            .values(lease_expires_at=now - timedelta(microseconds=1), updated_at=now)
        )
        if held_by is not None:
            statement = statement.where(
                func.substr(_C.lease_holder, 1, len(held_by)) == held_by
            )
        async with self._writes.begin() as conn:
            return int((await conn.execute(statement)).rowcount or 0)

    async def purge_finished(self, before: datetime) -> int:
        """Delete done and failed jobs last changed before `before` (housekeeping)."""
        finished = (JobStatus.DONE.value, JobStatus.FAILED.value)
        statement = delete(_JOB).where(_C.status.in_(finished), _C.updated_at < before)
        async with self._writes.begin() as conn:
            return int((await conn.execute(statement)).rowcount or 0)

    async def next_due(self, now: datetime) -> datetime | None:
        """When a claim may next find work: the earliest pending due time or running lease
        expiry (never before `now`); None for an idle table."""
        pending = select(func.min(_C.due_at)).where(_C.status == _PENDING)
        leases = select(func.min(_C.lease_expires_at)).where(_C.status == _RUNNING)
        query = select(pending.scalar_subquery(), leases.scalar_subquery())
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).one()
        times = [t for t in row if t is not None]
        return max(now, min(times)) if times else None

    async def counts(self) -> dict[str, int]:
        query = select(_C.status, func.count()).group_by(_C.status)
        async with self._engine.connect() as conn:
            found = {status: int(n) for status, n in (await conn.execute(query)).all()}
        return {status.value: found.get(status.value, 0) for status in JobStatus}

    async def get(self, job_id: int) -> JobRow | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(_JOB).where(_C.id == job_id))).first()
        return _job_row(row) if row is not None else None

    async def open_with_key_prefix(self, prefix: str) -> list[JobRow]:
        """Pending or running jobs whose idempotency key starts with `prefix`."""
        query = (
            select(_JOB)
            .where(_C.status.in_(OPEN), _C.idempotency_key.startswith(prefix, autoescape=True))
            .order_by(_C.id)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_job_row(row) for row in rows]

    async def _held(
        self, statement: Any, job_id: int, holder: str, now: datetime, **params: Any
    ) -> bool:
        values = {"job_id": job_id, "holder": holder, "now": now, **params}
        async with self._writes.begin() as conn:
            result = await conn.execute(statement, values)
        return result.rowcount == 1


def _validate(kind: str, payload: Mapping[str, Any], key: str | None, max_attempts: int) -> None:
    if not kind or len(kind) > MAX_KIND_CHARS:
        raise ValueError(f"job kind must be 1-{MAX_KIND_CHARS} characters, got {kind!r}")
    if not isinstance(payload, Mapping):
        raise ValueError(f"job payload must be a dict, got {type(payload).__name__}")
    try:
        json.dumps(dict(payload), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"job payload is not JSON-serialisable: {exc}") from exc
    if key is not None and not 0 < len(key) <= MAX_KEY_CHARS:
        raise ValueError(f"job key must be 1-{MAX_KEY_CHARS} characters, got {len(key)}")
    if max_attempts < 1:
        raise ValueError(f"job max_attempts must be at least 1, got {max_attempts}")


def _validate_holder(holder: str) -> None:
    if not 0 < len(holder) <= MAX_HOLDER_CHARS:
        raise ValueError(f"lease holder must be 1-{MAX_HOLDER_CHARS} characters: {holder!r}")


def _claimed(row: Any) -> ClaimedJob:
    return ClaimedJob(
        id=row.id,
        kind=row.kind,
        payload=dict(row.payload),
        key=row.idempotency_key,
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        due_at=row.due_at,
    )


def _job_row(row: Any) -> JobRow:
    return JobRow(
        id=row.id,
        kind=row.kind,
        payload=dict(row.payload),
        key=row.idempotency_key,
        status=row.status,
        due_at=row.due_at,
        lease_holder=row.lease_holder,
        lease_expires_at=row.lease_expires_at,
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        last_error=row.last_error,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )
