"""Telling the owners of an automatic blacklisting: a private message to each, and e-mail when
none of them got it.

  job `persona.notify_owners` -> one private message per owner, through the outbox
  -> job `persona.notify_check`, `check_after_s` later: was any of them sent?
  -> no: e-mail through the configured SMTP server (PALLAS_SMTP_*); no server: a log line

Both jobs are durable: a restart in between still checks, and the keyed messages are queued
at most once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import Origin
from pallas.core.inbound import Segment, SegmentKind, StreamKey, StreamKind
from pallas.platform.smtp import MailNotSent, SmtpConfig, send_mail
from pallas.product.conversation.delivery.contract import OutgoingMessage, Sender
from pallas.product.conversation.jobs.registry import Jobs
from pallas.store.identities import ensure_stream
from pallas.store.jobs import ClaimedJob
from pallas.store.outbox import OutboxStatus, OutboxStore

PRIVATE_CHAT = "私聊"  # the owner's word for a private chat in /解除拉黑 and /拉黑

CHECK_KIND = "persona.notify_check"


@dataclass
class NotifyDeps:
    engine: AsyncEngine
    sender: Sender
    outbox: OutboxStore
    jobs: Jobs
    owners: tuple[str, ...]
    smtp: SmtpConfig
    action_ids: Callable[[], int]
    clock: Callable[[], datetime]
    check_after_s: Callable[[], float]  # asked when a notice is queued: the console sets it


def blacklist_notice(payload: dict[str, str]) -> str:
    chat = payload["group"]
    where = "私聊里" if chat == PRIVATE_CHAT else f"群 {chat} 的"
    return (
        f"{where} {payload['name']}（{payload['user_id']}）一天里两次骂到我被气到静默，"
        f"已自动拉黑：TA在那里说的话我都不理了。"
        f"要原谅TA，发 /解除拉黑 {chat} {payload['user_id']}"
    )


async def notify_owners(job: ClaimedJob, deps: NotifyDeps) -> None:
    text = blacklist_notice(job.payload)
    queued: list[int] = []
    for owner in deps.owners:
        platform, self_id = str(job.payload["platform"]), str(job.payload["self_id"])
        key = StreamKey(platform, self_id, StreamKind.PRIVATE, owner)
        stream_id = await ensure_stream(deps.engine, key, deps.clock())
        segments = (Segment(SegmentKind.TEXT, text=text),)
        message = OutgoingMessage(
            deps.action_ids(),
            stream_id,
            segments,
            key=f"notify:{job.id}:{owner}",
            origin=Origin.NOTICE,
        )
        queued.extend(await deps.sender.send(message))
    due = deps.clock() + timedelta(seconds=deps.check_after_s())
    payload = {"outbox_ids": queued, "text": text}
    await deps.jobs.enqueue(CHECK_KIND, payload, key=f"{CHECK_KIND}:{job.id}", due_at=due)


async def check_notice(job: ClaimedJob, deps: NotifyDeps) -> None:
    statuses = await deps.outbox.statuses([int(i) for i in job.payload["outbox_ids"]])
    if OutboxStatus.SENT.value in statuses.values():
        return
    text = str(job.payload["text"])
    if not deps.smtp.usable:
        logger.warning("persona: no owner got the notice and no e-mail is set up: {}", text)
        return
    try:
        await send_mail(deps.smtp, "Pallas：有人被自动拉黑", text)
    except MailNotSent as exc:
        logger.error("persona: the owners' notice could not be e-mailed either: {}", exc)
        raise  # the job retries with backoff
    logger.info("persona: the owners' notice went by e-mail ({})", ", ".join(deps.smtp.recipients))
