"""Ask NapCat for what an event left out, off the ingress path.

A forward arrives by id only (NapCat parses its content only when configured to), and an @
arrives as a bare QQ number. Both are fetched after the message is stored: a forward's first
lines with `get_forward_msg`, an unknown member's name with `get_group_member_info`. Each
answer is recorded as a fact through the recorder (the ingress), like every other fact.
Lookups are bounded (a few at a time, each with a timeout); a failure costs one log line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Coroutine
from typing import Any

from loguru import logger
from nonebot.adapters.onebot.v11 import Bot
from nonebot.exception import AdapterException

from pallas.core.inbound import (
    ForwardContent,
    InboundMessage,
    MemberProfile,
    SegmentKind,
    StreamKind,
)
from pallas.core.text import excerpt
from pallas.platform.onebot.segments import forward_summary
from pallas.platform.onebot.send import Recorder

MAX_IN_FLIGHT = 4
MAX_QUEUED = 200  # lookups waiting beyond this are skipped: they are a nicety, not a record
LOOKUP_TIMEOUT_S = 10.0
MAX_MEMBERS_PER_MESSAGE = 5


def forwards_to_fetch(msg: InboundMessage) -> list[str]:
    """The ids of forwards in the message whose content did not come with it."""
    return [
        seg.target
        for seg in msg.segments
        if seg.kind is SegmentKind.FORWARD and seg.target and seg.text == "[聊天记录]"
    ]


class PlatformLookups:
    def __init__(self, recorder: Recorder, max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self._recorder = recorder
        self._slots = asyncio.Semaphore(max_in_flight)
        self._tasks: set[asyncio.Task[None]] = set()

    def fill_in(self, bot: Bot, msg: InboundMessage, unknown_users: Collection[str]) -> None:
        """Start the look-ups this message needs; returns at once."""
        jobs: list[Coroutine[Any, Any, None]] = [
            self._forward(bot, msg, forward_id) for forward_id in forwards_to_fetch(msg)
        ]
        if msg.stream.kind is StreamKind.GROUP:
            jobs += [
                self._member(bot, msg, user_id)
                for user_id in list(unknown_users)[:MAX_MEMBERS_PER_MESSAGE]
            ]
        for job in jobs:
            if len(self._tasks) >= MAX_QUEUED:
                logger.warning("platform look-ups: {} queued, skipping more", len(self._tasks))
                job.close()
                continue
            task = asyncio.create_task(self._bounded(job))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the look-ups under way (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _bounded(self, job: Coroutine[Any, Any, None]) -> None:
        async with self._slots:
            try:
                await asyncio.wait_for(job, LOOKUP_TIMEOUT_S)
            except (AdapterException, TimeoutError) as exc:
                logger.info("platform look-up failed: {!r}", exc)
            except Exception as exc:  # a look-up is a nicety; it never takes anything down
                logger.opt(exception=exc).warning("platform look-up failed")

    async def _forward(self, bot: Bot, msg: InboundMessage, forward_id: str) -> None:
        data: Any = await bot.call_api("get_forward_msg", message_id=forward_id)
        messages = data.get("messages") if isinstance(data, dict) else None
        summary = forward_summary(messages) if isinstance(messages, list) else ""
        if not summary:
            logger.info("forward {}: NapCat returned no readable content", excerpt(forward_id, 40))
            return
        await self._recorder.accept(
            ForwardContent(msg.stream, msg.platform_message_id, forward_id, summary)
        )

    async def _member(self, bot: Bot, msg: InboundMessage, user_id: str) -> None:
        if not user_id.isdigit():
            return
        data: Any = await bot.call_api(
            "get_group_member_info",
            group_id=int(msg.stream.external_id),
            user_id=int(user_id),
            no_cache=False,
        )
        if not isinstance(data, dict):
            return
        await self._recorder.accept(
            MemberProfile(
                msg.stream,
                user_id,
                nickname=_text(data.get("nickname")),
                card=_text(data.get("card")),
                role=_text(data.get("role")),
            )
        )


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
