"""A section whose values act outside the store: a feature's config from the agent file,
which the console changes while the bot runs. The agent file gives the defaults; what the
console saved is checked again and handed to the feature when saved and at every start."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Generic, TypeVar

from loguru import logger
from pydantic import BaseModel, ValidationError

from pallas.product.settings.features import TableStorage
from pallas.product.settings.registry import Scope, Section
from pallas.store.settings_table import SettingsTable

SCOPE = "global"
C = TypeVar("C", bound=BaseModel)


class AppliedStorage(TableStorage, Generic[C]):
    def __init__(self, key: str, table: SettingsTable, base: C, apply: Callable[[C], None]) -> None:
        super().__init__(key, table)
        self._base = base
        self._apply = apply

    async def save(self, scope_id: str, stored: dict[str, Any], now: datetime) -> None:
        await super().save(scope_id, stored, now)
        self._apply(self._checked(stored))

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
        self._apply(checked)

    def _checked(self, stored: Mapping[str, Any]) -> C:
        return type(self._base).model_validate(self._base.model_dump() | dict(stored))


def applied_section(
    key: str,
    title: str,
    table: SettingsTable,
    base: C,
    apply: Callable[[C], None],
    titles: Mapping[str, str],
    helps: Mapping[str, str] | None = None,
) -> Section:
    """A global section over `base`'s own model, in `titles`' order."""
    return Section(
        key=key,
        title=title,
        scope=Scope.GLOBAL,
        model=type(base),
        defaults=base,
        storage=AppliedStorage(key, table, base, apply),
        titles=titles,
        applies="下一条消息起生效",
        helps=helps or {},
    )
