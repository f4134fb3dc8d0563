"""The daily digest (docs/summaries.md): per group, off by default, at the hour an admin
picks, exactly once a day across restarts.

  hourly tick (a periodic job) -> the groups whose digest hour it is -> job `summaries.digest`
  keyed by the group and the local date -> the day's summary (making.py) -> the group, or
  privately to its admins -> a check a minute later: none of them got it -> the group, once,
  and the digest goes to the group from then on (QQ refuses many private messages)

A tick that runs late (the bot was down at the hour) also covers the hours it missed, up to a
day; the date in the key keeps a day to one digest whoever enqueues it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from loguru import logger
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKey, StreamKind
from pallas.core.local_time import SHANGHAI
from pallas.product.conversation.delivery.contract import Sender
from pallas.product.conversation.jobs.periodic import PeriodicJob, fire_of
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.summaries.making import MAKE_KIND, SummaryAsk, say
from pallas.product.summaries.settings import SECTION, SummaryKnobs
from pallas.product.summaries.window import MAX_LINES, Window
from pallas.store.conversation import newest_message_id, stream_key
from pallas.store.identities import ensure_stream
from pallas.store.jobs import ClaimedJob
from pallas.store.members import group_admins
from pallas.store.outbox import OutboxStatus, OutboxStore
from pallas.store.settings_table import SettingsTable

TICK_KIND = "summaries.digest_tick"
CHECK_KIND = "summaries.digest_check"
TICK = PeriodicJob(name="summaries_digest", kind=TICK_KIND, cron="0 * * * *")
CHECK_AFTER = timedelta(seconds=60)
LATE_HOURS = 24  # a late tick covers at most this many missed hours
FELL_BACK = "（私聊发不出去，日报发在群里了，以后也发群里。）"


def hours_due(fire: datetime, now: datetime) -> list[datetime]:
    """The whole hours from the tick's fire time to now (a late tick's missed ones too)."""
    first = fire.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    count = min(LATE_HOURS, int((now - first) // timedelta(hours=1)) + 1)
    return [first + timedelta(hours=n) for n in range(max(1, count))]


def digest_key(stream_id: int, hour: datetime) -> str:
    return f"digest:{stream_id}:{hour.astimezone(SHANGHAI).date().isoformat()}"


def digests_due(
    groups: Mapping[str, SummaryKnobs], hours: list[datetime]
) -> list[tuple[int, datetime]]:
    """(group, hour) for each group whose digest is on and whose hour is among `hours`."""
    due = []
    for scope_id, knobs in groups.items():
        for hour in hours:
            if knobs.digest and hour.astimezone(SHANGHAI).hour == knobs.digest_hour:
                due.append((int(scope_id), hour))
    return due


def valid_knobs(stored: Mapping[str, dict[str, Any]]) -> dict[str, SummaryKnobs]:
    groups = {}
    for scope_id, values in stored.items():
        try:
            groups[scope_id] = SummaryKnobs.model_validate(values)
        except ValidationError as exc:  # stored under other bounds: skipped, said
            logger.warning("summaries: group {} settings not valid now: {}", scope_id, exc)
    return {scope: knobs for scope, knobs in groups.items() if scope.isdigit()}


@dataclass
class DigestTick:
    engine: AsyncEngine
    table: SettingsTable
    jobs: Jobs
    clock: Callable[[], datetime]

    async def __call__(self, job: ClaimedJob) -> None:
        now = self.clock()
        hours = hours_due(fire_of(TICK, job.key) or now, now)
        groups = valid_knobs(await self.table.scopes(SECTION))
        for stream_id, hour in digests_due(groups, hours):
            key = await stream_key(self.engine, stream_id)
            if key is None or key.kind != StreamKind.GROUP:
                continue
            ask = SummaryAsk(
                digest_key(stream_id, hour), stream_id, Window(hours=24, lines=MAX_LINES),
                await newest_message_id(self.engine, stream_id), hour, key.self_id,
                title="今天的聊天日报", digest=True,
                to_admins=groups[str(stream_id)].digest_to == "admins",
            )  # fmt: skip
            ref = await self.jobs.enqueue(MAKE_KIND, ask.payload(), key=ask.key, max_attempts=3)
            if ref.created:
                logger.info("summaries: digest {} queued", ask.key)


@dataclass
class AdminDelivery:
    """A digest for the admins: privately to each, then a check that someone got it."""

    engine: AsyncEngine
    sender: Sender
    outbox: OutboxStore
    jobs: Jobs
    action_ids: Callable[[], int]
    clock: Callable[[], datetime]
    change: Callable[[str, Mapping[str, Any]], Awaitable[None]]  # the group's settings

    async def __call__(self, summary: SummaryAsk, words: str) -> None:
        group = await stream_key(self.engine, summary.stream_id)
        admins = await group_admins(self.engine, summary.stream_id)
        if group is None or not admins:
            await self._to_group(summary, words)
            return
        queued: list[int] = []
        for admin in admins:
            private = StreamKey(group.platform, summary.account, StreamKind.PRIVATE, admin)
            stream_id = await ensure_stream(self.engine, private, self.clock())
            queued.extend(await say(self.sender, self.action_ids(), summary, words,
                                    stream_id=stream_id, key=f"{summary.key}:{admin}"))  # fmt: skip
        payload = {"summary": summary.payload(), "words": words, "outbox_ids": queued}
        await self.jobs.enqueue(CHECK_KIND, payload, key=f"{CHECK_KIND}:{summary.key}",
                                due_at=self.clock() + CHECK_AFTER)  # fmt: skip

    async def check(self, job: ClaimedJob) -> None:
        ids = [int(i) for i in job.payload["outbox_ids"]]
        if OutboxStatus.SENT.value in (await self.outbox.statuses(ids)).values():
            return
        summary = SummaryAsk.of(job.payload["summary"])
        await self._to_group(summary, str(job.payload["words"]))

    async def _to_group(self, summary: SummaryAsk, words: str) -> None:
        await say(self.sender, self.action_ids(), summary, f"{words}\n{FELL_BACK}")
        await self.change(str(summary.stream_id), {"digest_to": "group"})
        logger.info("summaries: digest {} went to the group: no admin got it", summary.key)
