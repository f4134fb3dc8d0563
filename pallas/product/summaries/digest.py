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
from pallas.store.conversation import newest_before, stream_key
from pallas.store.identities import ensure_stream
from pallas.store.jobs import ClaimedJob
from pallas.store.members import group_admins
from pallas.store.outbox import OutboxStatus, OutboxStore
from pallas.store.settings_table import SettingsTable

TICK_KIND = "summaries.digest_tick"
CHECK_KIND = "summaries.digest_check"
TICK = PeriodicJob(name="summaries_digest", kind=TICK_KIND, cron="0 * * * *")
CHECK_AFTER = timedelta(seconds=60)
MAX_LOOKS = 5  # a private message still on its way after this many looks: taken as refused
LATE_HOURS = 24  # a late tick covers at most this many missed hours
FELL_BACK = "（私聊发不出去，日报发在群里了，以后也发群里。）"


def hours_due(fire: datetime, now: datetime) -> list[datetime]:
    """The whole hours from the tick's fire time to now (a late tick's missed ones too, the
    latest LATE_HOURS of them: after a long stop, today's digest, not an old day's)."""
    hour = timedelta(hours=1)
    first = fire.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    last = max(first, now.astimezone(UTC).replace(minute=0, second=0, microsecond=0))
    first = max(first, last - (LATE_HOURS - 1) * hour)
    return [first + n * hour for n in range(int((last - first) // hour) + 1)]


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
                key=digest_key(stream_id, hour), stream_id=stream_id,
                window=Window(hours=24, lines=MAX_LINES),
                up_to=await newest_before(self.engine, stream_id, hour), at=hour,
                account=key.self_id, title="今天的聊天日报", digest=True,
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
        admins = [] if group is None else await group_admins(self.engine, summary.stream_id,
                                                              group.platform)  # fmt: skip
        if group is None or not admins:
            await self._to_group(summary, words, fell_back=False)
            return
        queued: list[int] = []
        for admin in admins:
            private = StreamKey(group.platform, summary.account, StreamKind.PRIVATE, admin)
            stream_id = await ensure_stream(self.engine, private, self.clock())
            queued.extend(await say(self.sender, self.action_ids(), summary, words,
                                    stream_id=stream_id, key=f"{summary.key}:{admin}"))  # fmt: skip
        payload = {"summary": summary.payload(), "words": words, "outbox_ids": queued}
        await self._check_later(payload, 1)

    async def _check_later(self, payload: dict[str, Any], look: int) -> None:
        key = f"{CHECK_KIND}:{payload['summary']['key']}:{look}"
        await self.jobs.enqueue(CHECK_KIND, {**payload, "look": look}, key=key,
                                due_at=self.clock() + CHECK_AFTER)  # fmt: skip

    async def check(self, job: ClaimedJob) -> None:
        ids = [int(i) for i in job.payload["outbox_ids"]]
        verdict = delivery_verdict(set((await self.outbox.statuses(ids)).values()),
                                   int(job.payload.get("look", 1)))  # fmt: skip
        if verdict == "wait":
            await self._check_later(job.payload, int(job.payload.get("look", 1)) + 1)
        elif verdict == "refused":
            summary = SummaryAsk.of(job.payload["summary"])
            await self._to_group(summary, f"{job.payload['words']}\n{FELL_BACK}", fell_back=True)

    async def _to_group(self, summary: SummaryAsk, words: str, fell_back: bool) -> None:
        await say(self.sender, self.action_ids(), summary, words)
        if fell_back:  # said once: from now on the digest goes to the group
            await self.change(str(summary.stream_id), {"digest_to": "group"})
        logger.info("summaries: digest {} went to the group ({})", summary.key,
                    "no admin got it" if fell_back else "no admin known")  # fmt: skip


def delivery_verdict(statuses: set[str], look: int) -> str:
    """Whether an admin got the digest (pure): "got" when one was sent (or may have been:
    `unknown` after a crash is never taken as refused), "wait" while some are still on their
    way (up to MAX_LOOKS looks), else "refused"."""
    if statuses & {OutboxStatus.SENT.value, OutboxStatus.UNKNOWN.value}:
        return "got"
    on_the_way = {OutboxStatus.PENDING.value, OutboxStatus.SENDING.value}
    if statuses & on_the_way and look < MAX_LOOKS:
        return "wait"
    return "refused"
