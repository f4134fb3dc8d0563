"""A section whose values act outside the store: a feature's config from the agent file,
which the console changes while the bot runs. The agent file gives the defaults; what the
console saved is checked again, then read by the feature's parts where they act through a
`Live` reader (kept current when saved and at every start); nothing is set on the parts."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Generic, TypeVar

from loguru import logger
from pydantic import BaseModel, ValidationError

from pallas.product.settings.features import TableStorage
from pallas.product.settings.registry import Scope, Section
from pallas.store.settings_table import SettingsTable

SCOPE = "global"
C = TypeVar("C", bound=BaseModel)


class Live(Generic[C]):
    """A section's current values, as its parts read them where they act (`live()`); the
    agent file's config until the console saved something else."""

    def __init__(self, base: C) -> None:
        self.base = base
        self._value = base

    def __call__(self) -> C:
        return self._value

    def _take(self, value: C) -> None:
        self._value = value


class AppliedStorage(TableStorage, Generic[C]):
    def __init__(self, key: str, table: SettingsTable, live: Live[C]) -> None:
        super().__init__(key, table)
        self._base = live.base
        self._live = live

    async def save(self, scope_id: str, stored: dict[str, Any], now: datetime) -> None:
        await super().save(scope_id, stored, now)
        self._live._take(self._checked(stored))

    async def restore(self) -> None:
        stored = await self.load(SCOPE)
        if not stored:
            return
        try:  # stored under earlier bounds, perhaps: never applied unchecked
            checked = self._checked(stored)
        except ValidationError as exc:
            logger.warning("{} settings stored are not valid now, defaults used: {}",
                           self._key, exc)  # fmt: skip
            return
        self._live._take(checked)

    def _checked(self, stored: Mapping[str, Any]) -> C:
        return type(self._base).model_validate(self._base.model_dump() | dict(stored))


def applied_section(
    key: str,
    title: str,
    table: SettingsTable,
    live: Live[C],
    titles: Mapping[str, str],
    helps: Mapping[str, str] | None = None,
) -> Section:
    """A global section over the base config's own model, in `titles`' order; `live` is
    what the feature's parts read."""
    return Section(
        key=key,
        title=title,
        scope=Scope.GLOBAL,
        model=type(live.base),
        defaults=live.base,
        storage=AppliedStorage(key, table, live),
        titles=titles,
        applies="下一条消息起生效",
        helps=helps or {},
        current=live,
    )
