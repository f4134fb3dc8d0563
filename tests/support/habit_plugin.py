"""A plugin for the end-to-end media test, loaded by `bot_with_plugins.py`: runs the sticker
habit scan every 2 seconds once the file named by PALLAS_E2E_HABIT_GO exists (the real job
runs every 30 minutes; the test starts the scans once the stickers' files are kept)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from packages._runtime import current_runtime
from pallas.product.conversation.jobs.periodic import PeriodicJob
from pallas.product.media.sticker_habit import HABIT_KIND
from pallas.store.jobs import ClaimedJob

GO = Path(os.environ["PALLAS_E2E_HABIT_GO"])
NUDGE = PeriodicJob(name="e2e_habit", kind="e2e.habit", every=timedelta(seconds=2))

_runtime = current_runtime()


async def nudge(job: ClaimedJob) -> None:
    if GO.exists():
        await _runtime.jobs.enqueue(HABIT_KIND, {}, key=f"e2e-habit:{job.key}")


_runtime.jobs.handle("e2e.habit", nudge)
_runtime.jobs.every(NUDGE)
