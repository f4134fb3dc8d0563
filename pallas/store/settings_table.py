"""Settings sections' stored values, one row per section and scope; read on every turn, so
kept in memory too (bounded), and every write here updates that copy."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.database import Database
from pallas.store.models import SettingValues
from pallas.store.sql import BoundedCache, upsert

CACHED = 10_000


class SettingsTable:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writes = Database.of(engine).writes()
        self._cache: BoundedCache[tuple[str, str], dict[str, Any]] = BoundedCache(CACHED)

    async def load(self, section: str, scope_id: str) -> dict[str, Any]:
        hit = self._cache.get((section, scope_id))
        if hit is not None:
            return dict(hit)
        query = select(SettingValues.values).where(
            SettingValues.section == section, SettingValues.scope_id == scope_id
        )
        async with self._engine.connect() as conn:
            stored = dict((await conn.execute(query)).scalar() or {})
        self._cache.put_all({(section, scope_id): stored})
        return dict(stored)

    async def scopes(self, section: str) -> dict[str, dict[str, Any]]:
        """Every scope with values stored for the section (a daily job's groups)."""
        query = select(SettingValues.scope_id, SettingValues.values).where(
            SettingValues.section == section
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return {row.scope_id: dict(row.values or {}) for row in rows}

    async def save(
        self, section: str, scope_id: str, values: dict[str, Any], now: datetime
    ) -> None:
        row = {"section": section, "scope_id": scope_id, "values": values, "updated_at": now}
        async with self._writes.begin() as conn:
            await conn.execute(upsert(conn, SettingValues.__table__, ["section", "scope_id"], row))
        self._cache.put_all({(section, scope_id): dict(values)})
