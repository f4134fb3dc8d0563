"""Every settings change with what it replaced: the values a section had at a past moment
(the replay runs a recorded day under that day's settings, docs/cost.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.database import Database
from pallas.store.models import SettingChange


class SettingHistory:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()

    async def record(
        self,
        section: str,
        scope_id: str,
        before: dict[str, Any],
        after: dict[str, Any],
        now: datetime,
    ) -> None:
        row = {
            "section": section,
            "scope_id": scope_id,
            "before": before,
            "after": after,
            "changed_at": now,
        }
        async with self._writes.begin() as conn:
            await conn.execute(insert(SettingChange), [row])

    async def changes(
        self, section: str, scope_id: str
    ) -> list[tuple[datetime, dict[str, Any], dict[str, Any]]]:
        """(changed at, before, after), oldest first."""
        query = (
            select(SettingChange.changed_at, SettingChange.before, SettingChange.after)
            .where(SettingChange.section == section, SettingChange.scope_id == scope_id)
            .order_by(SettingChange.changed_at, SettingChange.id)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [(at, dict(before), dict(after)) for at, before, after in rows]


def in_force_at(
    changes: list[tuple[datetime, dict[str, Any], dict[str, Any]]],
    at: datetime,
    current: dict[str, Any],
) -> dict[str, Any]:
    """The stored values at `at`: what the last change before it left, else what the first
    change after it replaced, else what is stored now (nothing changed since)."""
    before_at = [after for changed, _, after in changes if changed <= at]
    if before_at:
        return before_at[-1]
    later = [before for changed, before, _ in changes if changed > at]
    return later[0] if later else current
