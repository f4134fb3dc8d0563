"""Tasks on the console (docs/tasks.md): every open reminder and the latest research tasks,
and cancelling either; the page's script draws from these routes.

  GET    /pallas/api/tasks                   open reminders (soonest first), recent research
  DELETE /pallas/api/tasks/reminders/{id}    cancel a reminder
  DELETE /pallas/api/tasks/research/{id}     cancel a research task still running
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException

from pallas.core.local_time import SHANGHAI
from pallas.platform.http_params import RowId
from pallas.product.ports import OwnerPage
from pallas.product.tasks.research_store import STATUS_WORDS, ResearchStore
from pallas.product.tasks.store import ReminderStore

CONSOLE_RESEARCH = 50

TASKS_PAGE = OwnerPage(
    key="tasks",
    title="提醒和调研",
    intro="大家设的提醒和让机器人在后台查的事：哪个聊天、谁、什么时候；都可以在这里取消。",
    script=Path(__file__).parent / "static" / "tasks.js",
)


def tasks_routes(
    reminders: ReminderStore, research: ResearchStore, clock: Callable[[], datetime]
) -> APIRouter:
    router = APIRouter()

    @router.get("/tasks", tags=["tasks"])
    async def tasks() -> dict[str, Any]:
        found = await research.recent(None, limit=CONSOLE_RESEARCH)
        return {
            "reminders": [
                {"id": r.id, "stream_id": r.stream_id, "user_id": r.user_id, "text": r.text,
                 "due_at": r.due_at.astimezone(SHANGHAI).isoformat(),
                 "repeat": None if r.rhythm is None else r.rhythm.words()}
                for r in await reminders.open_ones(None)
            ],
            "research": [
                {"id": r.id, "stream_id": r.stream_id, "user_id": r.user_id,
                 "question": r.question, "status": r.status,
                 "status_words": STATUS_WORDS.get(r.status, r.status),
                 "asked_at": r.created_at.astimezone(SHANGHAI).isoformat()}
                for r in found
            ],
        }  # fmt: skip

    @router.delete("/tasks/reminders/{reminder_id}", tags=["tasks"])
    async def cancel_reminder(reminder_id: RowId) -> dict[str, bool]:
        if not await reminders.cancel(reminder_id, None, clock()):
            raise HTTPException(404, "没有这个待提醒的事")
        return {"cancelled": True}

    @router.delete("/tasks/research/{research_id}", tags=["tasks"])
    async def cancel_research(research_id: RowId) -> dict[str, bool]:
        if not await research.cancel(research_id, None, clock()):
            raise HTTPException(404, "没有这件在查的事")
        return {"cancelled": True}

    return router
