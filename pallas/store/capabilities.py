"""Owner switches and overrides of tools, plugins and skills; deferred-tool activations."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.store.database import Database
from pallas.store.models import CapabilitySetting, ToolActivation
from pallas.store.sql import upsert


@dataclass(frozen=True)
class Setting:
    enabled: bool | None = None  # None: the default (on)
    embedded: bool | None = None
    overrides: dict[str, Any] = field(default_factory=dict)


async def load_settings(engine: AsyncEngine, kind: str) -> dict[str, Setting]:
    query = select(CapabilitySetting).where(CapabilitySetting.kind == kind)
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return {row.name: Setting(row.enabled, row.embedded, dict(row.overrides or {})) for row in rows}


async def save_setting(
    engine: AsyncEngine, kind: str, name: str, setting: Setting, now: datetime
) -> None:
    values = {
        "kind": kind,
        "name": name,
        "enabled": setting.enabled,
        "embedded": setting.embedded,
        "overrides": setting.overrides,
        "updated_at": now,
    }
    async with Database.of(engine).write() as conn:
        await conn.execute(
            upsert(conn, CapabilitySetting.__table__, ["kind", "name"], values)  # type: ignore[arg-type]
        )


async def clear_enabled(engine: AsyncEngine, kind: str, names: Iterable[str], now: datetime) -> int:
    """Drop stored "off" switches for these names (essential tools); the count dropped."""
    names = list(names)
    if not names:
        return 0
    settings = await load_settings(engine, kind)
    purged = [n for n in names if n in settings and settings[n].enabled is False]
    for name in purged:
        old = settings[name]
        await save_setting(engine, kind, name, Setting(None, old.embedded, old.overrides), now)
    return len(purged)


async def activate(
    engine: AsyncEngine, stream_id: int, names: Iterable[str], until: datetime
) -> None:
    async with Database.of(engine).write() as conn:
        for name in names:
            values = {"stream_id": stream_id, "name": name, "expires_at": until}
            await conn.execute(
                upsert(conn, ToolActivation.__table__, ["stream_id", "name"], values)  # type: ignore[arg-type]
            )


async def active_tools(engine: AsyncEngine, stream_id: int, now: datetime) -> frozenset[str]:
    query = select(ToolActivation.name).where(
        ToolActivation.stream_id == stream_id, ToolActivation.expires_at > now
    )
    async with engine.connect() as conn:
        return frozenset((await conn.execute(query)).scalars().all())
