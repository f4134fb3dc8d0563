"""After-turn observers: work that follows a turn without delaying it.

When a turn ends (it acted, chose silence, failed, or its batch was dropped) each registered
observer hears of it in a task of its own, after the ending is recorded. An observer should
only enqueue durable jobs (docs/jobs.md): memory extraction, image description, the
sticker-habit scan. A slow or failing observer never holds up or breaks the next turn.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from loguru import logger

from pallas.core.inbound import StreamKey


class TurnEnding(StrEnum):
    DONE = "done"  # the agent acted (a reply or an action was queued) or had nothing to do
    SILENT = "silent"  # it looked and chose silence
    FAILED = "failed"  # the handler raised
    DROPPED = "dropped"  # the batch did not pass the gate when its turn came


@dataclass(frozen=True)
class TurnEnded:
    turn_id: int
    stream_id: int
    stream: StreamKey
    message_ids: tuple[int, ...]
    ending: TurnEnding
    at: datetime
    occasion: str = ""  # a proactive turn's reason (turns/proactive.py); empty for replies


class TurnObserver(Protocol):
    name: str

    async def turn_ended(self, ended: TurnEnded) -> None: ...


class TurnObservers:
    def __init__(self) -> None:
        self._observers: list[TurnObserver] = []
        self._running: set[asyncio.Task[None]] = set()

    def register(self, observer: TurnObserver) -> None:
        self._observers.append(observer)

    def notify(self, ended: TurnEnded) -> None:
        """Tell every observer, each in its own task; returns at once."""
        for observer in self._observers:
            task = asyncio.create_task(
                self._tell(observer, ended), name=f"after turn {observer.name}"
            )
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def drain(self) -> None:
        """Wait for the observers still running (at shutdown, and in tests)."""
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)

    @staticmethod
    async def _tell(observer: TurnObserver, ended: TurnEnded) -> None:
        try:
            await observer.turn_ended(ended)
        except Exception as exc:
            logger.opt(exception=exc).error(
                "after-turn observer {} failed for turn {}", observer.name, ended.turn_id
            )
