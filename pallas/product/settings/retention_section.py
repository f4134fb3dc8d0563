"""How long things are kept, as a settings section: `.env` gives the defaults, the console
changes them, and the retention job reads them at its next run (docs/retention.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from loguru import logger
from pydantic import BaseModel, ConfigDict, Field, field_validator

from pallas.config import RETENTION_DAYS, RETENTION_MAX_DAYS, RETENTION_MIN_STORE_DAYS
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.conversation.retention import (
    RETENTION,
    RETENTION_KIND,
    RETENTION_TIMEOUT_S,
    RetentionDeps,
    RetentionHolders,
    RetentionPolicy,
    retention_job,
)
from pallas.product.settings.features import TableStorage
from pallas.product.settings.registry import (
    Scope,
    Section,
    SettingsError,
    SettingsRegistry,
    validate,
)
from pallas.providers.call_log import CallLog
from pallas.store.retention import RetentionStore, outbox_holds
from pallas.store.settings_table import SettingsTable

KEY = "retention"
SCOPE = "global"
MAX_DAYS = RETENTION_MAX_DAYS
MIN_STORE_DAYS = RETENTION_MIN_STORE_DAYS  # why: pallas/config.py


class RetentionKnobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    messages_days: int = Field(default=RETENTION_DAYS["messages"], ge=0, le=MAX_DAYS)
    events_days: int = Field(default=RETENTION_DAYS["events"], ge=0, le=MAX_DAYS)
    model_calls_days: int = Field(default=RETENTION_DAYS["model_calls"], ge=0, le=MAX_DAYS)
    call_log_days: int = Field(default=RETENTION_DAYS["call_log"], ge=0, le=MAX_DAYS)

    @field_validator("messages_days", "events_days", "model_calls_days")
    @classmethod
    def _a_week_at_least(cls, value: int) -> int:
        if 0 < value < MIN_STORE_DAYS:
            raise ValueError(f"填 0（一直留着）或者至少 {MIN_STORE_DAYS} 天")
        return value


TITLES = {
    "messages_days": "聊天记录留几天",
    "events_days": "处理记录（为什么回、为什么没回）留几天",
    "model_calls_days": "模型调用的账目留几天",
    "call_log_days": "模型调用的原文日志留几天",
}
HELPS = {
    "messages_days": "0 就是一直留着。记忆的出处、还没发出去的回复引用的消息不会被删",
    "events_days": (
        "0 就是一直留着。更早的消息就查不到「为什么没理」了；发出去的回复记录也一起清掉"
    ),
    "model_calls_days": "0 就是一直留着。「模型」页面的花费最多看 90 天",
    "call_log_days": "0 就是一直留着（文件本身仍按大小轮换）。日志在数据目录的 logs/llm 下",
}


def retention_section(table: SettingsTable, defaults: RetentionPolicy) -> Section:
    return Section(
        key=KEY,
        title="记录留多久",
        scope=Scope.GLOBAL,
        model=RetentionKnobs,
        defaults=RetentionKnobs.model_construct(**vars(defaults)),
        storage=TableStorage(KEY, table),
        titles=TITLES,
        applies="下一次清理起生效（每小时一次）",
        helps=HELPS,
    )


def policy_reader(section: Section) -> Callable[[], Awaitable[RetentionPolicy]]:
    """What the job asks at every run: the stored values over the defaults, checked; values
    stored under bounds that have since changed are not used (a warning says so)."""

    async def read() -> RetentionPolicy:
        stored = await section.storage.load(SCOPE)
        try:
            checked = validate(section, stored)
        except SettingsError as exc:
            logger.warning("retention settings stored are not valid now, defaults used: {}", exc)
            checked = section.defaults
        return RetentionPolicy(**checked.model_dump())

    return read


@dataclass(frozen=True)
class RetentionParts:
    store: RetentionStore
    holders: RetentionHolders
    table: SettingsTable
    call_log: CallLog
    defaults: RetentionPolicy  # from .env
    clock: Callable[[], datetime]


def install_retention(parts: RetentionParts, jobs: Jobs, registry: SettingsRegistry) -> None:
    """The section, the core's own holder (replies still to be sent) and the hourly job."""
    section = retention_section(parts.table, parts.defaults)
    registry.register(section)
    parts.holders.hold("outbox", partial(outbox_holds, parts.store.engine))

    async def prune_call_log(cutoff: datetime) -> int:
        return await asyncio.to_thread(parts.call_log.prune_older_than, cutoff)

    deps = RetentionDeps(
        store=parts.store,
        holders=parts.holders,
        policy=policy_reader(section),
        prune_call_log=prune_call_log,
        clock=parts.clock,
    )
    jobs.handle(RETENTION_KIND, partial(retention_job, deps=deps), timeout_s=RETENTION_TIMEOUT_S)
    jobs.every(RETENTION)
