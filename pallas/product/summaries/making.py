"""Making a summary: a durable job reads the window, asks the model, and says the summary in
the chat, once (the outbox key is the job's). A request, a latecomer's question and the
daily digest all end here.

  /总结, /我错过了什么, chat.summarize, the digest -> job `summary.make`
  -> the window's lines (at most window.MAX_LINES) -> chunks -> model -> one message
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from loguru import logger
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import Origin
from pallas.core.inbound import Segment, SegmentKind
from pallas.product.conversation.delivery.contract import OutgoingMessage, Sender
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.summaries.summarize import summarize
from pallas.product.summaries.window import (
    MAX_LINES,
    Window,
    chunks,
    render,
    speaker_names,
    window_words,
    worth_reading,
)
from pallas.providers.budget import BudgetReachedError
from pallas.providers.errors import ProviderError
from pallas.providers.manager import ModelManager
from pallas.store.conversation import lines_since
from pallas.store.jobs import ClaimedJob
from pallas.store.models import Job

MAKE_KIND = "summary.make"
MIN_LINES = 3  # fewer than this is not worth a model call
REQUEST_WINDOW = timedelta(hours=1)


@dataclass(frozen=True)
class SummaryAsk:
    """One summary to make: of which chat, over which window, up to which message, said by
    which account; `key` names it (the job's key and the outbox's)."""

    key: str
    stream_id: int
    window: Window
    up_to: int  # the newest message it may read (the request itself excluded)
    at: datetime  # when it was asked: the window's hours count back from here
    account: str
    title: str = ""  # what the message starts with; the window's words when empty
    digest: bool = False  # the daily digest: a quiet day says nothing; may go to the admins
    to_admins: bool = False  # privately to the group's owner and admins (digest.py)

    def payload(self) -> dict[str, Any]:
        return {**asdict(self), "window": asdict(self.window), "at": self.at.isoformat()}

    @staticmethod
    def of(payload: dict[str, Any]) -> SummaryAsk:
        return SummaryAsk(**{**payload, "window": Window(**payload["window"]),
                             "at": datetime.fromisoformat(payload["at"])})  # fmt: skip


def request_key(stream_id: int, name: str, exempt: bool = False) -> str:
    """A member's request is counted against the chat's allowance by this key; an owner's
    has a key of its own, never counted."""
    return f"{'summary-owner' if exempt else 'summary'}:{stream_id}:{name}"


async def requests_in_last_hour(engine: AsyncEngine, stream_id: int, now: datetime) -> int:
    """Members' summaries asked for in this chat within the hour (the jobs keep count
    across restarts)."""
    query = select(func.count()).where(
        Job.idempotency_key.startswith(request_key(stream_id, ""), autoescape=True),
        Job.created_at >= now - REQUEST_WINDOW,
    )
    async with engine.connect() as conn:
        return int((await conn.execute(query)).scalar() or 0)


async def ask(jobs: Jobs, summary: SummaryAsk) -> bool:
    """Queue the summary; False when it was queued already (the same request again)."""
    ref = await jobs.enqueue(MAKE_KIND, summary.payload(), key=summary.key, max_attempts=3)
    return ref.created


@dataclass
class SummaryMaking:
    engine: AsyncEngine
    models: ModelManager
    sender: Sender
    action_ids: Callable[[], int]
    bot_name: str
    # Where a digest for the admins goes instead of the group (digest.py's AdminDelivery).
    to_admins: Callable[[SummaryAsk, str], Awaitable[None]] | None = None

    async def __call__(self, job: ClaimedJob) -> None:
        summary = SummaryAsk.of(job.payload)
        window = summary.window
        found = await lines_since(self.engine, summary.stream_id, window.since(summary.at),
                                  (window.after_message, summary.up_to), window.lines)  # fmt: skip
        lines = worth_reading(found)
        about = window_words(window)
        title = summary.title or f"{about}的聊天"
        if len(lines) < MIN_LINES:
            if not summary.digest:  # a quiet day has no digest
                await self._say(summary, f"{about}没几句话，不用总结。")
            return
        rendered = render(lines, speaker_names(lines, self.bot_name))
        runs = chunks(rendered)
        read = sum(len(run) for run in runs)
        try:
            text = await summarize(self.models, runs, about, summary.stream_id)
        except ProviderError as exc:
            await self._failed(summary, exc)
            return
        capped = window.lines == MAX_LINES and len(found) == MAX_LINES
        cut = "，太长只看了最新的" if read < len(lines) or capped else ""
        words = f"{title}（{read} 条{cut}）：\n{text}"
        if summary.to_admins and self.to_admins is not None:
            await self.to_admins(summary, words)
        else:
            await self._say(summary, words)
        logger.info("summary {}: {} line(s) in {} call(s)", summary.key, read,
                    len(runs) + (len(runs) > 1))  # fmt: skip

    async def _failed(self, summary: SummaryAsk, exc: ProviderError) -> None:
        """Someone who asked is told why not; a digest nobody asked for says nothing, and is
        tried again (a spent budget: not before tomorrow, so not at all)."""
        logger.warning("summary {}: no summary: {!r}", summary.key, exc)
        if summary.digest:
            if isinstance(exc, BudgetReachedError):
                return
            raise exc  # the job's retries
        spent = isinstance(exc, BudgetReachedError)
        await self._say(summary, "今天的模型额度用完了，总结不了。" if spent
                        else "总结没做成：模型暂时连不上，过会儿再试。")  # fmt: skip

    async def _say(self, summary: SummaryAsk, words: str) -> None:
        await say(self.sender, self.action_ids(), summary, words)


async def say(sender: Sender, action_id: int, summary: SummaryAsk, words: str,
              stream_id: int | None = None, key: str | None = None) -> tuple[int, ...]:  # fmt: skip
    """The words in the summary's chat (or `stream_id`), under its key (or `key`): once."""
    message = OutgoingMessage(
        action_id, stream_id or summary.stream_id, (Segment(SegmentKind.TEXT, text=words),),
        key=key or summary.key, origin=Origin.TASK, account=summary.account,
    )  # fmt: skip
    return await sender.send(message)

