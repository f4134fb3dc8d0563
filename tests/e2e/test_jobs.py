"""End to end: durable jobs in the real bot process across a real crash (SIGKILL).

A job cut off mid-run by kill -9 runs again after the restart and completes exactly once; a
periodic job keeps its schedule across the restart and no fire runs twice.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pallas.store.engine import create_engine
from pallas.store.jobs import JobStore
from tests.support.bot_process import REPO_ROOT, BotProcess
from tests.support.timeline_db import TimelineDb, wait_for

SLOW = 30.0


def lines(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def ticks(log: Path) -> list[str]:
    return [line.removeprefix("tick ") for line in lines(log) if line.startswith("tick ")]


async def test_a_job_cut_off_by_a_crash_completes_once_and_ticks_never_double(
    tmp_path: Path,
) -> None:
    log = tmp_path / "jobs.log"
    bot = BotProcess(
        tmp_path / "bot",
        env={"PALLAS_E2E_JOB_LOG": str(log), "PALLAS_E2E_PLUGINS": "tests.support.job_plugin"},
        script=REPO_ROOT / "tests" / "support" / "bot_with_plugins.py",
    )
    bot.start()
    try:
        await bot.wait_ready()
        engine = create_engine(f"sqlite+aiosqlite:///{bot.db_path}")
        try:
            ref = await JobStore(engine).enqueue(
                "e2e.slow", {"why": "test"}, datetime.now(UTC), key="e2e-slow"
            )
        finally:
            await engine.dispose()
        await wait_for(lambda: f"start {ref.id} 1" in lines(log), SLOW, "the first run begun")
        await wait_for(lambda: len(ticks(log)) >= 2, SLOW, "two ticks before the crash")

        bot.kill()  # SIGKILL, mid-run: the job is left `running` under a dead lease
        before = ticks(log)
        bot.start()
        await bot.wait_ready()
        await wait_for(lambda: f"done {ref.id}" in lines(log), SLOW, "the job finished")
        await wait_for(lambda: len(ticks(log)) >= len(before) + 2, SLOW, "ticks after it")
    finally:
        bot.stop()

    runs = [line for line in lines(log) if not line.startswith("tick ")]
    assert runs == [f"start {ref.id} 1", f"start {ref.id} 2", f"done {ref.id}"]
    db = TimelineDb(bot.db_path)
    [job] = db.query("SELECT status, attempts, last_error FROM job WHERE id = ?", ref.id)
    assert (job["status"], job["attempts"]) == ("done", 2)
    fired = ticks(log)
    assert len(fired) == len(set(fired)), fired  # no fire ran twice
    times = [datetime.fromisoformat(key.split(":", 2)[2]) for key in fired]  # periodic:name:at
    assert times == sorted(times)
    assert all(t.second % 2 == 0 and t.microsecond == 0 for t in times)  # on the 2 s grid
    keys = db.query("SELECT idempotency_key, status FROM job WHERE kind = 'e2e.tick'")
    assert len({row["idempotency_key"] for row in keys}) == len(keys)
    assert sum(row["status"] in ("pending", "running") for row in keys) <= 1
