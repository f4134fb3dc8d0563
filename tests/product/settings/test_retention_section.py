"""The retention section through the settings registry, on both backends: `.env`'s days are the
defaults, a change is stored and read by the job's next run, a bad value is refused in
Chinese, and the section, the core's holder and the hourly job are installed together."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.conversation.retention import (
    RETENTION,
    RETENTION_KIND,
    RetentionHolders,
    RetentionPolicy,
)
from pallas.product.settings.registry import FieldKind, SettingsError, SettingsRegistry
from pallas.product.settings.retention_section import (
    KEY,
    RetentionParts,
    install_retention,
    policy_reader,
    retention_section,
)
from pallas.providers.call_log import CallLog
from pallas.store.jobs import JobStore
from pallas.store.retention import RetentionStore
from pallas.store.settings_table import SettingsTable

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
FROM_ENV = RetentionPolicy(messages_days=365, events_days=30, model_calls_days=60, call_log_days=7)


async def test_env_days_are_the_defaults_and_a_change_reaches_the_next_run(
    engine: AsyncEngine,
) -> None:
    registry = SettingsRegistry()
    section = retention_section(SettingsTable(engine), FROM_ENV)
    registry.register(section)
    read = policy_reader(section)
    assert await read() == FROM_ENV
    shown = await registry.read(KEY, "global")
    first = shown.fields[0]
    assert (first.name, first.default, first.kind, first.minimum, first.maximum) == (
        "messages_days",
        365,
        FieldKind.INT,
        0,
        3650,
    )
    assert all(f.title and f.help for f in shown.fields)  # titles and help, in Chinese
    await registry.update(KEY, "global", {"messages_days": 0, "events_days": 14}, NOW)
    assert await read() == RetentionPolicy(0, 14, 60, 7)
    assert (await section.storage.load("global")) == {"messages_days": 0, "events_days": 14}


async def test_less_than_a_week_is_refused_and_nothing_is_saved(engine: AsyncEngine) -> None:
    registry = SettingsRegistry()
    section = retention_section(SettingsTable(engine), RetentionPolicy())
    registry.register(section)
    with pytest.raises(SettingsError) as refused:
        await registry.update(KEY, "global", {"messages_days": 3, "call_log_days": -1}, NOW)
    assert refused.value.problems == {
        "messages_days": "填 0（一直留着）或者至少 7 天",
        "call_log_days": "不能小于 0",
    }
    assert await section.storage.load("global") == {}
    await registry.update(KEY, "global", {"call_log_days": 1}, NOW)  # files: a day is fine
    assert (await policy_reader(section)()).call_log_days == 1


async def test_values_stored_under_other_bounds_are_not_used(engine: AsyncEngine) -> None:
    table = SettingsTable(engine)
    await table.save(KEY, "global", {"events_days": 2}, NOW)
    assert await policy_reader(retention_section(table, FROM_ENV))() == FROM_ENV


async def test_installing_registers_the_section_the_outbox_holder_and_the_job(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    registry, holders = SettingsRegistry(), RetentionHolders()
    jobs = Jobs(JobStore(engine), lambda: NOW)
    parts = RetentionParts(
        RetentionStore(engine),
        holders,
        SettingsTable(engine),
        CallLog(tmp_path / "llm", started_at=NOW),
        RetentionPolicy(),
        lambda: NOW,
    )
    install_retention(parts, jobs, registry)
    assert [s.key for s in registry.sections()] == [KEY]
    assert holders.names() == ["outbox"]
    with pytest.raises(ValueError, match="already has a handler"):
        jobs.handle(RETENTION_KIND, lambda job: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="declared twice"):
        jobs.every(RETENTION)
