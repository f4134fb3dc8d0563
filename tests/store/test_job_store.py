"""The job store on a real database: keys, validation, claims, leases, settling, counts."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.jobs import MAX_ERROR_CHARS, JobStatus, JobStore

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def _claim(store: JobStore, holder: str, now: datetime, limit: int = 10) -> list[int]:
    return [job.id for job in await store.claim(holder, now, lease=LEASE, limit=limit)]


# --- enqueue -----------------------------------------------------------------------------


async def test_a_new_job_is_pending_with_every_column_set(engine: AsyncEngine) -> None:
    store = JobStore(engine)
    ref = await store.enqueue("digest", {"group": "42"}, T0, max_attempts=3)
    assert ref.created
    job = await store.get(ref.id)
    assert job is not None
    assert (job.kind, job.payload, job.key, job.status) == (
        "digest",
        {"group": "42"},
        None,
        "pending",
    )
    assert (job.due_at, job.created_at, job.updated_at) == (T0, T0, T0)
    assert (job.attempts, job.max_attempts, job.last_error) == (0, 3, "")
    assert (job.lease_holder, job.lease_expires_at) == (None, None)
    assert await store.get(ref.id + 1000) is None


async def test_a_duplicate_key_creates_nothing_and_returns_the_first_job(
    engine: AsyncEngine,
) -> None:
    store = JobStore(engine)
    first = await store.enqueue("digest", {"n": 1}, T0, key="digest:42:2026-12-01")
    again = await store.enqueue("digest", {"n": 2}, at(5), key="digest:42:2026-12-01", due_at=at(9))
    other = await store.enqueue("digest", {"n": 3}, T0, key="digest:42:2026-12-02")
    assert first.created and not again.created and other.created
    assert again.id == first.id != other.id
    job = await store.get(first.id)
    assert job is not None and (job.payload, job.due_at, job.created_at) == ({"n": 1}, T0, T0)
    assert (await store.counts())["pending"] == 2


async def test_jobs_without_a_key_are_never_deduplicated(engine: AsyncEngine) -> None:
    store = JobStore(engine)
    refs = [await store.enqueue("ping", {}, T0) for _ in range(3)]
    assert all(ref.created for ref in refs) and len({ref.id for ref in refs}) == 3


@pytest.mark.parametrize(
    ("kind", "payload", "key", "max_attempts", "message"),
    [
        pytest.param("", {}, None, 5, "kind", id="empty kind"),
        pytest.param("k" * 65, {}, None, 5, "kind", id="kind too long"),
        pytest.param("k", ["not", "a", "dict"], None, 5, "dict", id="payload not a dict"),
        pytest.param("k", {"when": T0}, None, 5, "JSON", id="payload not JSON"),
        pytest.param("k", {"x": math.nan}, None, 5, "JSON", id="payload with NaN"),
        pytest.param("k", {}, "x" * 201, 5, "key", id="key too long"),
        pytest.param("k", {}, "", 5, "key", id="empty key"),
        pytest.param("k", {}, None, 0, "max_attempts", id="no attempt allowed"),
    ],
)
async def test_invalid_jobs_are_refused_and_nothing_is_written(
    engine: AsyncEngine, kind: str, payload: Any, key: str | None, max_attempts: int, message: str
) -> None:
    store = JobStore(engine)
    with pytest.raises(ValueError, match=message):
        await store.enqueue(kind, payload, T0, key=key, max_attempts=max_attempts)
    assert sum((await store.counts()).values()) == 0


async def test_a_naive_due_time_is_refused(engine: AsyncEngine) -> None:
    store = JobStore(engine)
    with pytest.raises(ValueError, match="aware"):
        await store.enqueue("k", {}, T0, due_at=datetime(2026, 12, 1, 13, 0))
    assert sum((await store.counts()).values()) == 0


async def test_the_longest_kind_and_key_are_accepted(engine: AsyncEngine) -> None:
    store = JobStore(engine)
    ref = await store.enqueue("k" * 64, {}, T0, key="x" * 200, max_attempts=1)
    job = await store.get(ref.id)
    assert job is not None and (len(job.kind), len(job.key or "")) == (64, 200)


# --- claim -------------------------------------------------------------------------------


async def test_claim_takes_due_jobs_oldest_first_up_to_the_limit(engine: AsyncEngine) -> None:
    store = JobStore(engine)
    late = await store.enqueue("a", {}, T0, due_at=at(3))
    early = await store.enqueue("b", {"i": 1}, T0, due_at=at(1), key="b1")
    middle = await store.enqueue("c", {}, T0, due_at=at(2))
    tie = await store.enqueue("d", {}, T0, due_at=at(1))  # same due time: id order
    future = await store.enqueue("e", {}, T0, due_at=at(25))
    claimed = await store.claim("w1", at(5), lease=LEASE, limit=3)
    assert [job.id for job in claimed] == [early.id, tie.id, middle.id]
    first = claimed[0]
    assert (first.kind, first.payload, first.key, first.attempts, first.max_attempts) == (
        "b",
        {"i": 1},
        "b1",
        1,
        5,
    )
    assert first.due_at == at(1)
    row = await store.get(early.id)
    assert row is not None
    assert (row.status, row.lease_holder, row.lease_expires_at) == ("running", "w1", at(35))
    assert (row.attempts, row.updated_at) == (1, at(5))
    assert await _claim(store, "w1", at(5)) == [late.id]
    assert await _claim(store, "w1", at(24)) == []
    assert await _claim(store, "w1", at(25)) == [future.id]  # due exactly now


async def test_a_live_lease_keeps_the_job_from_other_claimers(engine: AsyncEngine) -> None:
    store = JobStore(engine)
    ref = await store.enqueue("a", {}, T0)
    assert await _claim(store, "w1", T0) == [ref.id]
    assert await _claim(store, "w2", at(10)) == []
    assert await _claim(store, "w2", at(30)) == []  # expiring, not yet expired


async def test_an_expired_lease_is_reclaimed_and_the_old_holder_is_ignored(
    engine: AsyncEngine,
) -> None:
    store = JobStore(engine)
    ref = await store.enqueue("a", {}, T0)
    assert await _claim(store, "w1", T0) == [ref.id]
    [job] = await store.claim("w2", at(31), lease=LEASE, limit=5)  # w1 died (kill -9)
    assert (job.id, job.attempts) == (ref.id, 2)
    assert not await store.finish(ref.id, "w1", at(32))
    assert not await store.retry(ref.id, "w1", at(40), "late", at(32))
    assert not await store.fail(ref.id, "w1", "late", at(32))
    assert not await store.extend(ref.id, "w1", at(32), LEASE)
    row = await store.get(ref.id)
    assert row is not None and (row.status, row.lease_holder, row.last_error) == (
        "running",
        "w2",
        "",
    )
    assert await store.finish(ref.id, "w2", at(33))
    row = await store.get(ref.id)
    assert row is not None and (row.status, row.attempts, row.updated_at) == ("done", 2, at(33))


async def test_expired_leases_are_reclaimed_before_pending_jobs(engine: AsyncEngine) -> None:
    store = JobStore(engine)
    stuck = await store.enqueue("a", {}, T0)
    await _claim(store, "w1", T0)
    waiting = await store.enqueue("b", {}, at(1))
    assert await _claim(store, "w2", at(40), limit=1) == [stuck.id]
    assert await _claim(store, "w2", at(40), limit=1) == [waiting.id]


async def test_an_expired_lease_with_no_attempt_left_fails_instead(engine: AsyncEngine) -> None:
    store = JobStore(engine)
    ref = await store.enqueue("a", {}, T0, max_attempts=2)
    await _claim(store, "w1", T0)
    assert await store.retry(ref.id, "w1", at(1), "boom", at(1))
    assert await _claim(store, "w1", at(1)) == [ref.id]  # the second and last attempt
    other = await store.enqueue("b", {}, at(2))
    assert await _claim(store, "w2", at(60)) == [other.id]
    row = await store.get(ref.id)
    assert row is not None
    assert (row.status, row.attempts) == ("failed", 2)
    assert row.last_error == "lease expired after 2 attempts"
    assert row.lease_expires_at is None and row.updated_at == at(60)


async def test_an_extended_lease_is_not_reclaimed(engine: AsyncEngine) -> None:
    store = JobStore(engine)
    ref = await store.enqueue("a", {}, T0)
    await _claim(store, "w1", T0)
    assert await store.extend(ref.id, "w1", at(25), LEASE)
    assert await _claim(store, "w2", at(40)) == []
    row = await store.get(ref.id)
    assert row is not None and row.lease_expires_at == at(55)
    assert await _claim(store, "w2", at(56)) == [ref.id]


# --- settle ------------------------------------------------------------------------------


async def test_retry_returns_the_job_to_pending_and_keeps_its_attempts(
    engine: AsyncEngine,
) -> None:
    store = JobStore(engine)
    ref = await store.enqueue("a", {}, T0)
    await _claim(store, "w1", T0)
    assert await store.retry(ref.id, "w1", at(10), "x" * 1000, at(1))
    row = await store.get(ref.id)
    assert row is not None
    assert (row.status, row.attempts, row.due_at, row.updated_at) == ("pending", 1, at(10), at(1))
    assert row.last_error == "x" * MAX_ERROR_CHARS and row.lease_expires_at is None
    assert await _claim(store, "w1", at(9)) == []
    [again] = await store.claim("w1", at(10), lease=LEASE, limit=1)
    assert again.attempts == 2


async def test_fail_is_final_and_keeps_the_error(engine: AsyncEngine) -> None:
    store = JobStore(engine)
    ref = await store.enqueue("a", {}, T0)
    await _claim(store, "w1", T0)
    assert await store.fail(ref.id, "w1", "ValueError('bad')", at(1))
    row = await store.get(ref.id)
    assert row is not None and (row.status, row.last_error) == ("failed", "ValueError('bad')")
    assert await _claim(store, "w2", at(1000)) == []


async def test_a_job_that_is_not_running_cannot_be_settled(engine: AsyncEngine) -> None:
    store = JobStore(engine)
    ref = await store.enqueue("a", {}, T0)
    assert not await store.finish(ref.id, "w1", T0)  # pending
    assert not await store.fail(ref.id + 1000, "w1", "no such job", T0)
    await _claim(store, "w1", T0)
    assert await store.finish(ref.id, "w1", at(1))
    assert not await store.finish(ref.id, "w1", at(2))  # already done
    assert not await store.retry(ref.id, "w1", at(3), "again", at(2))


async def test_concurrent_claimers_never_take_the_same_job(engine: AsyncEngine) -> None:
    writer = JobStore(engine)
    for i in range(200):
        await writer.enqueue("bulk", {"i": i}, T0)
    # A store each, no shared lock: only the database keeps them apart.
    claimers = [JobStore(engine) for _ in range(4)]

    async def claim_all(store: JobStore, holder: str) -> list[int]:
        taken: list[int] = []
        while batch := await _claim(store, holder, at(1), limit=7):
            taken += batch
            await asyncio.sleep(0)
        return taken

    results = await asyncio.gather(*(claim_all(s, f"w{i}") for i, s in enumerate(claimers)))
    taken = [job_id for result in results for job_id in result]
    assert len(taken) == len(set(taken)) == 200
    assert (await writer.counts())["running"] == 200


# --- reading -----------------------------------------------------------------------------


async def test_next_due_is_the_earliest_pending_due_time_or_lease_expiry(
    engine: AsyncEngine,
) -> None:
    store = JobStore(engine)
    assert await store.next_due(T0) is None
    await store.enqueue("a", {}, T0, due_at=at(50))
    assert await store.next_due(T0) == at(50)
    leased = await store.enqueue("b", {}, T0, due_at=at(1))
    await _claim(store, "w1", at(1))  # lease until 31
    assert await store.next_due(at(2)) == at(31)
    await store.finish(leased.id, "w1", at(3))
    assert await store.next_due(at(3)) == at(50)
    assert await store.next_due(at(70)) == at(70)  # overdue: now


async def test_counts_report_every_status(engine: AsyncEngine) -> None:
    store = JobStore(engine)
    assert await store.counts() == {"pending": 0, "running": 0, "done": 0, "failed": 0}
    for _ in range(5):
        await store.enqueue("a", {}, T0)
    claimed = await _claim(store, "w1", T0, limit=3)
    await store.finish(claimed[0], "w1", T0)
    await store.fail(claimed[1], "w1", "no", T0)
    assert await store.counts() == {
        JobStatus.PENDING.value: 2,
        JobStatus.RUNNING.value: 1,
        JobStatus.DONE.value: 1,
        JobStatus.FAILED.value: 1,
    }


async def test_open_jobs_are_found_by_key_prefix(engine: AsyncEngine) -> None:
    store = JobStore(engine)
    done = await store.enqueue("p", {}, T0, key="periodic:a:1")
    await _claim(store, "w1", T0)
    await store.finish(done.id, "w1", T0)
    pending = await store.enqueue("p", {}, T0, key="periodic:a:2")
    await store.enqueue("p", {}, T0, key="periodic:ab:1")
    await store.enqueue("p", {}, T0, key="periodic%a:1")
    await store.enqueue("p", {}, T0)
    found = await store.open_with_key_prefix("periodic:a:")
    assert [job.id for job in found] == [pending.id]
    assert [job.key for job in await store.open_with_key_prefix("periodic%")] == ["periodic%a:1"]
    assert await store.open_with_key_prefix("periodic_a") == []
