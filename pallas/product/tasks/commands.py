"""Tasks from the chat (docs/tasks.md): /提醒 <时间> <内容>, /提醒列表, /取消提醒 <编号>;
/调研 <问题>, /调研, /取消调研 <编号>.

Everyone may set their own; an owner sees and cancels everyone's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime

from pallas.core.local_time import SHANGHAI
from pallas.product.conversation.commands import Audience, CommandCall
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.tasks.research_start import research_line, start_research, started_words
from pallas.product.tasks.research_store import ResearchStore
from pallas.product.tasks.setting import Asker, QuietHours, set_reminder
from pallas.product.tasks.store import Reminder, ReminderStore
from pallas.product.tasks.when import Refused, When, read_when

_ID = re.compile(r"#?([0-9]{1,12})")
USAGE = "用法：/提醒 <时间> <内容>，比如 /提醒 20分钟后 喝水、/提醒 每天8点 吃药"


def split_when(args: str, now: datetime) -> tuple[When, str] | Refused:
    """The time at the head of the words (one to three of them) and what to say after it."""
    words = args.split()
    refused: Refused | None = None
    for count in (3, 2, 1):
        if len(words) <= count:
            continue
        found = read_when("".join(words[:count]), now, SHANGHAI)
        if isinstance(found, When):
            return found, " ".join(words[count:])
        if count == 1:
            refused = found
    return refused or Refused(USAGE)


def due_words(reminder: Reminder) -> str:
    at = reminder.due_at.astimezone(SHANGHAI).strftime("%m-%d %H:%M")
    rhythm = f"（{reminder.rhythm.words()}）" if reminder.rhythm is not None else ""
    return f"#{reminder.id} {at}{rhythm} {reminder.text}"


class RemindCommand:
    name = "提醒"
    summary = "到时候提醒你：/提醒 20分钟后 喝水；/提醒 每天8点 吃药"

    def __init__(
        self, store: ReminderStore, jobs: Jobs, clock: Callable[[], datetime], quiet: QuietHours
    ) -> None:
        self._store = store
        self._jobs = jobs
        self._clock = clock
        self._quiet = quiet

    async def run(self, call: CommandCall) -> str:
        now = self._clock()
        split = split_when(call.args, now)
        if isinstance(split, Refused):
            return split.reason
        when, text = split
        if not text.strip():
            return USAGE
        msg = call.stored.message
        asker = Asker(call.stored.stream_id, call.stored.sender_person_id, msg.sender.user_id,
                      msg.stream.self_id)  # fmt: skip
        done = await set_reminder(self._store, self._jobs, asker, when, text, now, self._quiet)
        return done.reason if isinstance(done, Refused) else done.words


class RemindersCommand:
    name = "提醒列表"
    summary = "看你设的提醒（主人看所有人的）"

    def __init__(self, store: ReminderStore) -> None:
        self._store = store

    async def run(self, call: CommandCall) -> str:
        person = None if call.rank >= Audience.OWNER else call.stored.sender_person_id
        reminders = await self._store.open_ones(person)
        if not reminders:
            return "没有待提醒的事。"
        return "待提醒的：\n" + "\n".join(due_words(r) for r in reminders)


class CancelReminderCommand:
    name = "取消提醒"
    summary = "取消一个提醒：/取消提醒 <编号>"

    def __init__(self, store: ReminderStore, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock

    async def run(self, call: CommandCall) -> str:
        match = _ID.fullmatch(call.args.strip())
        if match is None:
            return "用法：/取消提醒 <编号>（/提醒列表 里能看到编号）"
        person = None if call.rank >= Audience.OWNER else call.stored.sender_person_id
        cancelled = await self._store.cancel(int(match[1]), person, self._clock())
        return "取消了。" if cancelled else f"没有你能取消的第 {match[1]} 个提醒。"


class ResearchCommand:
    name = "调研"
    summary = "在后台帮你查资料，查完在这里告诉你：/调研 <问题>；只发 /调研 看进度"

    def __init__(self, store: ResearchStore, jobs: Jobs, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._jobs = jobs
        self._clock = clock

    async def run(self, call: CommandCall) -> str:
        if not call.args.strip():
            person = None if call.rank >= Audience.OWNER else call.stored.sender_person_id
            found = await self._store.recent(person)
            if not found:
                return "没有在查的事。用法：/调研 <问题>"
            return "查资料的事：\n" + "\n".join(research_line(r) for r in found)
        msg = call.stored.message
        asker = Asker(call.stored.stream_id, call.stored.sender_person_id, msg.sender.user_id,
                      msg.stream.self_id)  # fmt: skip
        started = await start_research(self._store, self._jobs, asker, call.args, self._clock())
        return started.reason if isinstance(started, Refused) else started_words(started)


class CancelResearchCommand:
    name = "取消调研"
    summary = "取消一件在查的事：/取消调研 <编号>"

    def __init__(self, store: ResearchStore, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock

    async def run(self, call: CommandCall) -> str:
        match = _ID.fullmatch(call.args.strip())
        if match is None:
            return "用法：/取消调研 <编号>（/调研 里能看到编号）"
        person = None if call.rank >= Audience.OWNER else call.stored.sender_person_id
        cancelled = await self._store.cancel(int(match[1]), person, self._clock())
        if not cancelled:
            return f"没有你能取消的第 {match[1]} 件在查的事。"
        return "取消了，查到的也不说了。"
