"""Setting a reminder, the same from a chat command and from the model's tool: the limits
checked, the row and its first job committed, the answer worded."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from pallas.core.local_time import SHANGHAI
from pallas.product.conversation.gate.policy import GatePolicy, is_quiet_time
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.tasks.firing import schedule
from pallas.product.tasks.store import (
    MAX_OPEN_PER_CHAT,
    MAX_OPEN_PER_PERSON,
    NewReminder,
    ReminderStore,
    TooMany,
)
from pallas.product.tasks.when import Refused, When

MAX_TEXT = 200


@dataclass(frozen=True)
class Asker:
    stream_id: int
    person_id: int
    user_id: str
    account: str  # the bot's account that was asked


@dataclass(frozen=True)
class Set:
    reminder_id: int
    when: When

    @property
    def words(self) -> str:
        at = self.when.at.astimezone(SHANGHAI).strftime("%m-%d %H:%M")
        rhythm = f"，之后{self.when.rhythm.words()}" if self.when.rhythm is not None else ""
        number = self.reminder_id
        return f"好，{at}{rhythm}提醒你（#{number}，/取消提醒 {number} 可以取消）。"


# The gate policy whose quiet hours (a group's 睡觉时段) a reminder in this chat keeps out
# of; None for a private chat.
QuietHours = Callable[[int, datetime], Awaitable[GatePolicy | None]]


def quiet_refusal(when: When, policy: GatePolicy | None) -> Refused | None:
    """A group's reminder is never said in its quiet hours (pure). A repeating one keeps one
    clock time, so its first time tells."""
    if policy is None or not is_quiet_time(when.at, policy):
        return None
    return Refused(f"群里 {'、'.join(policy.quiet_hours)} 是安静时段，那时候不在群里提醒；"
                   "换个时间，或者私聊我设。")  # fmt: skip


async def set_reminder(
    store: ReminderStore, jobs: Jobs, asker: Asker, when: When, text: str, now: datetime,
    quiet: QuietHours | None = None,
) -> Set | Refused:  # fmt: skip
    words = text.strip()
    if not words:
        return Refused("要说提醒什么。")
    if len(words) > MAX_TEXT:
        return Refused(f"内容太长了，最多 {MAX_TEXT} 个字。")
    if quiet is not None:
        refused = quiet_refusal(when, await quiet(asker.stream_id, now))
        if refused is not None:
            return refused
    new = NewReminder(asker.stream_id, asker.person_id, asker.user_id, asker.account, words,
                      when.at, when.rhythm)  # fmt: skip
    try:
        reminder_id = await store.add(new, now)
    except TooMany:
        return Refused(f"提醒太多了：每人最多 {MAX_OPEN_PER_PERSON} 个，每个聊天最多 "
                       f"{MAX_OPEN_PER_CHAT} 个，先取消一些。")  # fmt: skip
    await schedule(jobs, reminder_id, when.at)
    return Set(reminder_id, when)
