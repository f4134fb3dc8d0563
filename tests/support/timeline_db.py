"""Read the bot's real database from a test, and wait for rows to appear."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tests.support.waiting import TIMEOUT_S

T = TypeVar("T")


class TimelineDb:
    def __init__(self, path: Path) -> None:
        self.path = path

    def query(self, sql: str, *params: Any) -> list[sqlite3.Row]:
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5)
        conn.row_factory = sqlite3.Row
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def scalar(self, sql: str, *params: Any) -> Any:
        rows = self.query(sql, *params)
        return rows[0][0] if rows else None

    def messages(self, platform_message_id: str | int) -> list[sqlite3.Row]:
        return self.query(
            "SELECT m.*, s.kind AS stream_kind, s.external_id AS stream_external_id, "
            "s.self_id AS stream_self_id, i.user_id AS sender_user_id "
            "FROM message m JOIN stream s ON s.id = m.stream_id "
            "JOIN identity i ON i.person_id = m.sender_person_id "
            "WHERE m.platform_message_id = ?",
            str(platform_message_id),
        )

    def events(self, kind: str) -> list[sqlite3.Row]:
        return self.query("SELECT * FROM event WHERE kind = ? ORDER BY id", kind)


async def wait_for(check: Callable[[], T], timeout: float = TIMEOUT_S, what: str = "") -> T:
    """Poll until `check()` returns something truthy; fail with `what` on timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            value = check()
        except sqlite3.OperationalError:
            value = None  # the database may not exist yet
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        await asyncio.sleep(0.05)
