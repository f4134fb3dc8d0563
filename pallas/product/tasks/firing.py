"""A reminder fires: its words said in the chat that asked, with no model call, exactly once
per time it is due (docs/tasks.md, "Exactly once").

Each time it is due is a durable job keyed by the reminder and that time. The message is
queued under the same key, so a job run again after a crash queues nothing twice; the next
time of a repeating one is queued (under its own key) before the reminder moves on to it, so
a crash in between never loses the rhythm.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import Origin
from pallas.core.inbound import Segment, SegmentKind, StreamKind
from pallas.core.local_time import SHANGHAI
from pallas.product.conversation.delivery.contract import OutgoingMessage, Sender
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.tasks.store import Reminder, ReminderStatus, ReminderStore
from pallas.product.tasks.when import next_due
from pallas.store.conversation import stream_info
from pallas.store.jobs import ClaimedJob

REMIND_KIND = "task.remind"


def job_key(reminder_id: int, due: datetime) -> str:
    return f"remind:{reminder_id}:{due.isoformat()}"


async def schedule(jobs: Jobs, reminder_id: int, due: datetime) -> None:
    payload = {"reminder_id": reminder_id, "due": due.isoformat()}
    await jobs.enqueue(REMIND_KIND, payload, key=job_key(reminder_id, due), due_at=due)


def reminder_words(reminder: Reminder, group: bool) -> tuple[Segment, ...]:
    said = Segment(SegmentKind.TEXT, text=f"提醒：{reminder.text}")
    if not group:
        return (said,)
    return (Segment(SegmentKind.AT, target=reminder.user_id), Segment(SegmentKind.TEXT, text=" "),
            said)  # fmt: skip


class ReminderFiring:
    def __init__(
        self,
        store: ReminderStore,
        jobs: Jobs,
        sender: Sender,
        action_ids: Callable[[], int],
        clock: Callable[[], datetime],
        engine: AsyncEngine,
    ) -> None:
        self._store = store
        self._jobs = jobs
        self._sender = sender
        self._action_ids = action_ids
        self._clock = clock
        self._engine = engine

    async def __call__(self, job: ClaimedJob) -> None:
        reminder = await self._store.get(int(job.payload["reminder_id"]))
        due = datetime.fromisoformat(str(job.payload["due"]))
        if reminder is None or reminder.status != ReminderStatus.OPEN.value:
            return  # cancelled, or done: nothing to say
        if reminder.due_at != due:
            return  # moved on already: this time was said
        info = await stream_info(self._engine, reminder.stream_id)
        group = info is not None and info.kind == StreamKind.GROUP.value
        message = OutgoingMessage(
            self._action_ids(), reminder.stream_id, reminder_words(reminder, group),
            key=job_key(reminder.id, due), origin=Origin.TASK, account=reminder.account,
        )  # fmt: skip
        await self._sender.send(message)
        following = None if reminder.rhythm is None else next_due(reminder.rhythm, due, SHANGHAI)
        if following is not None:
            await schedule(self._jobs, reminder.id, following)
        await self._store.moved_on(reminder.id, due, following, self._clock())
        logger.info("reminder {} said (next: {})", reminder.id, following or "none")
