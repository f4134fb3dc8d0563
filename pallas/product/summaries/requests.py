"""Asking for a summary (the command and the tool alike): the group's hourly allowance
checked, the window fixed, the job queued. Owners are not counted."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.summaries.making import SummaryAsk, ask, request_key, requests_in_last_hour
from pallas.product.summaries.settings import SummaryKnobs
from pallas.product.summaries.window import MAX_HOURS, MAX_LINES, Window
from pallas.store.conversation import last_said_by


@dataclass(frozen=True)
class Request:
    stream_id: int
    up_to: int  # the newest message the window may read (the asking one excluded)
    question: int  # the asking message (a latecomer's window starts at their line before it)
    name: str  # what names the job: the asking message's id, or the turn's ("t12")
    person_id: int
    account: str
    exempt: bool  # an owner: not counted against the group's allowance


@dataclass
class SummaryRequests:
    engine: AsyncEngine
    jobs: Jobs
    clock: Callable[[], datetime]
    knobs: Callable[[str], Awaitable[SummaryKnobs]]

    async def summarize(self, request: Request, window: Window) -> str:
        """Empty when queued (the summary says itself); else why not, in one sentence."""
        now = self.clock()
        if not request.exempt:
            allowed = (await self.knobs(str(request.stream_id))).requests_per_hour
            if allowed == 0:
                return "这个群的总结只有主人能要。"
            if await requests_in_last_hour(self.engine, request.stream_id, now) >= allowed:
                return f"这个群一小时内最多总结 {allowed} 次，过会儿再来。"
        summary = SummaryAsk(key=request_key(request.stream_id, request.name, request.exempt),
                             stream_id=request.stream_id, window=window, up_to=request.up_to,
                             at=now, account=request.account)  # fmt: skip
        await ask(self.jobs, summary)
        return ""

    async def missed(self, request: Request) -> str:
        """What happened since the asker last spoke here."""
        last = await last_said_by(self.engine, request.stream_id, request.person_id,
                                  request.question)  # fmt: skip
        if last is None:
            return "没找到你之前在这说过话，用 /总结 看看最近聊了什么吧。"
        window = Window(hours=MAX_HOURS, lines=MAX_LINES, after_message=last)
        return await self.summarize(request, window)
