"""The model's task tools: `task.remind`, `task.list`, `task.cancel`, `task.research`
(docs/tasks.md).

Offered where they help: deferred, brought in when the batch asks for a reminder (提醒, 叫我,
a time phrase) or by `tools.find`. A reminder belongs to the person who wrote the batch; it is
said in this chat when due, with no model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from pallas.core.local_time import SHANGHAI
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.llm.tools.base import (
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolSpec,
    ToolTag,
    Visibility,
)
from pallas.product.tasks.research_start import start_research, started_words
from pallas.product.tasks.research_store import STATUS_WORDS, ResearchStore
from pallas.product.tasks.setting import Asker, QuietHours, set_reminder
from pallas.product.tasks.store import ReminderStore
from pallas.product.tasks.when import Refused, Rhythm, When, read_when
from pallas.store.identities import person_ids

DOMAIN = "tasks"
HINTS = ("提醒", "叫我", "喊我", "记得", "到时候", "分钟后", "小时后", "秒后", "天后", "明早",
         "明天", "今晚", "点叫", "闹钟", "定时", "每天", "每周", "查得怎么样", "查到了吗",
         "别查了")  # fmt: skip
RESEARCH_HINTS = ("查一下", "查查", "帮我查", "搜一下", "调研", "打听", "查完", "告诉我",
                  "回头告诉")  # fmt: skip


def _spec(name: str, description: str, parameters: Mapping[str, Any], *tags: ToolTag) -> ToolSpec:
    return ToolSpec(name=name, description=description, parameters=parameters,
                    tags=frozenset(tags), domains=(DOMAIN,), hints=HINTS,
                    visibility=Visibility.DEFERRED)  # fmt: skip


async def _asker(context: ToolContext) -> Asker:
    users = [u for u in context.asker_user_ids if u]
    if not users:
        raise ToolError("不知道是谁要提醒")
    conversation = context.conversation
    found = await person_ids(context.engine, conversation.stream.platform, users[-1:])
    if users[-1] not in found:
        raise ToolError("不知道是谁要提醒")
    return Asker(conversation.stream_id, found[users[-1]], users[-1], conversation.stream.self_id)


def with_repeat(when: When, repeat: str, now: datetime) -> When | Refused:
    """`daily`, `weekly` (at the first time's clock), or a phrase such as 每周一9点."""
    local = when.at.astimezone(SHANGHAI)
    if repeat == "daily":
        return When(when.at, Rhythm(local.hour, local.minute))
    if repeat == "weekly":
        return When(when.at, Rhythm(local.hour, local.minute, local.weekday()))
    found = read_when(repeat, now, SHANGHAI)
    if isinstance(found, Refused) or found.rhythm is None:
        return Refused("repeat 只能是 daily、weekly，或者「每天8点」「每周一9点」这样的说法")
    return found


class RemindTool(Tool):
    spec = _spec(
        "task.remind",
        "到时间提醒提问的人：到点时不经过模型，直接在这个会话里说 text（群里会 @ 他）。"
        "when 是带时区的 ISO 8601 时间（如 2026-12-04T20:00:00+08:00），或「20分钟后」"
        "「明早8点」这样的说法（按北京时间）；repeat 可选：daily、weekly 或「每周一9点」。",
        {
            "type": "object",
            "properties": {
                "when": {"type": "string", "description": "什么时候"},
                "text": {"type": "string", "description": "到时候说什么，不超过 200 字"},
                "repeat": {"type": "string", "description": "daily / weekly / 每周一9点"},
            },
            "required": ["when", "text"],
        },
        ToolTag.SIDE_EFFECT,
    )

    def __init__(
        self, store: ReminderStore, jobs: Jobs, clock: Callable[[], datetime], quiet: QuietHours
    ) -> None:
        self._store = store
        self._jobs = jobs
        self._clock = clock
        self._quiet = quiet

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        now = self._clock()
        when = read_when(str(arguments.get("when") or ""), now, SHANGHAI)
        repeat = str(arguments.get("repeat") or "").strip()
        if isinstance(when, When) and repeat:
            when = with_repeat(when, repeat, now)
        if isinstance(when, Refused):
            raise ToolError(when.reason)
        done = await set_reminder(self._store, self._jobs, await _asker(context), when,
                                  str(arguments.get("text") or ""), now, self._quiet)  # fmt: skip
        if isinstance(done, Refused):
            raise ToolError(done.reason)
        return ToolOutput({"id": done.reminder_id, "at": when.at.isoformat(),
                           "repeat": None if when.rhythm is None else when.rhythm.words(),
                           "said": done.words})  # fmt: skip


class ListTool(Tool):
    spec = _spec(
        "task.list",
        "提问的人设的、还没到时间的提醒（编号、时间、内容），和他让你在后台查的事（编号、进度）。",
        {"type": "object", "properties": {}},
        ToolTag.READ_ONLY,
    )

    def __init__(self, store: ReminderStore, research: ResearchStore) -> None:
        self._store = store
        self._research = research

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        asker = await _asker(context)
        reminders = await self._store.open_ones(asker.person_id)
        looked_up = await self._research.recent(asker.person_id)
        return ToolOutput({
            "reminders": [{"id": r.id, "at": r.due_at.astimezone(SHANGHAI).isoformat(),
                           "repeat": None if r.rhythm is None else r.rhythm.words(),
                           "text": r.text} for r in reminders],
            "research": [{"id": r.id, "question": r.question,
                          "status": STATUS_WORDS.get(r.status, r.status)} for r in looked_up],
        })  # fmt: skip


class CancelTool(Tool):
    spec = _spec(
        "task.cancel",
        "取消提问的人的一个提醒，或一件在后台查的事（编号见 task.list；kind 是 reminder 或 "
        "research，默认 reminder）。",
        {"type": "object", "properties": {
            "id": {"type": "integer"},
            "kind": {"type": "string", "enum": ["reminder", "research"]}},
         "required": ["id"]},
        ToolTag.SIDE_EFFECT,
    )  # fmt: skip

    def __init__(
        self, store: ReminderStore, research: ResearchStore, clock: Callable[[], datetime]
    ) -> None:
        self._store = store
        self._research = research
        self._clock = clock

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        try:
            task_id = int(arguments.get("id"))  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise ToolError("id 要是 task.list 里的编号") from exc
        asker = await _asker(context)
        person = None if context.conversation.asker_is_owner else asker.person_id
        if arguments.get("kind") == "research":
            if not await self._research.cancel(task_id, person, self._clock()):
                raise ToolError(f"没有能取消的第 {task_id} 件在查的事")
            return ToolOutput({"cancelled_research": task_id})
        if not await self._store.cancel(task_id, person, self._clock()):
            raise ToolError(f"没有能取消的第 {task_id} 个提醒")
        return ToolOutput({"cancelled": task_id})


class ResearchTool(Tool):
    spec = ToolSpec(
        name="task.research",
        description="在后台查资料：提问的人让你“查一下……然后告诉我”、不急着当场回答时用。"
        "后台用网页搜索查完后，直接把结果发到这个会话（群里会 @ 他），只发一次；"
        "你现在只需告诉他在查了。能当场回答的不要用。",
        parameters={"type": "object",
                    "properties": {"question": {"type": "string",
                                                "description": "要查的问题，300 字以内"}},
                    "required": ["question"]},
        tags=frozenset({ToolTag.SIDE_EFFECT}), domains=(DOMAIN,), hints=RESEARCH_HINTS,
        visibility=Visibility.DEFERRED,
    )  # fmt: skip

    def __init__(self, store: ResearchStore, jobs: Jobs, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._jobs = jobs
        self._clock = clock

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        question = str(arguments.get("question") or "")
        started = await start_research(self._store, self._jobs, await _asker(context), question,
                                       self._clock())  # fmt: skip
        if isinstance(started, Refused):
            raise ToolError(started.reason)
        return ToolOutput({"id": started, "said_later": True, "note": started_words(started)})


def task_tools(
    store: ReminderStore, research: ResearchStore, jobs: Jobs, clock: Callable[[], datetime],
    quiet: QuietHours,
) -> tuple[Tool, ...]:  # fmt: skip
    return (RemindTool(store, jobs, clock, quiet), ListTool(store, research),
            CancelTool(store, research, clock), ResearchTool(research, jobs, clock))  # fmt: skip
