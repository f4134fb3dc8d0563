"""Counting what an engine does while a test watches (statements run, transactions committed)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine


class EngineEvents:
    """Counts one kind of engine event (e.g. "before_cursor_execute", "commit") until closed."""

    def __init__(self, engine: AsyncEngine, kind: str) -> None:
        self.count = 0
        self._target, self._kind = engine.sync_engine, kind
        event.listen(self._target, kind, self._on)

    def _on(self, *_args: Any) -> None:
        self.count += 1

    def close(self) -> None:
        event.remove(self._target, self._kind, self._on)
