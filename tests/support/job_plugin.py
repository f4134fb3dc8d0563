"""A plugin for the end-to-end job tests, loaded by `bot_with_plugins.py`.

`e2e.slow` hangs on its first run (the test kills the bot meanwhile) and finishes on a later
one; `e2e.tick` is a periodic job every 2 seconds. Both note what they do in the file named by
PALLAS_E2E_JOB_LOG. The tick handler is idempotent, as every handler must be: a run whose
`done` was not committed before a crash runs again.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path

from packages._runtime import current_runtime
from pallas.product.conversation.jobs.periodic import PeriodicJob
from pallas.store.jobs import ClaimedJob

LOG = Path(os.environ["PALLAS_E2E_JOB_LOG"])
TICK = PeriodicJob(name="e2e_tick", kind="e2e.tick", every=timedelta(seconds=2))


def _note(line: str) -> None:
    with LOG.open("a", encoding="utf-8") as log:
        log.write(line + "\n")


async def slow(job: ClaimedJob) -> None:
    _note(f"start {job.id} {job.attempts}")
    if job.attempts == 1:
        await asyncio.sleep(3_600)  # cut off by the kill
    _note(f"done {job.id}")


async def tick(job: ClaimedJob) -> None:
    line = f"tick {job.key}"
    if LOG.exists() and line in LOG.read_text(encoding="utf-8").splitlines():
        return  # this fire already had its effect
    _note(line)


_runtime = current_runtime()
_runtime.jobs.handle("e2e.slow", slow, timeout_s=120)
_runtime.jobs.handle("e2e.tick", tick)
_runtime.jobs.every(TICK)
