"""Which registered model answers each kind of call, chosen in the console: the options are
the models the bot has now (dynamic), stored in the `setting` table and applied to the model
manager at once and at every start (docs/console.md, docs/models.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from loguru import logger
from pydantic import BaseModel, ConfigDict

from pallas.product.settings.features import TableStorage
from pallas.product.settings.registry import Scope, Section
from pallas.providers.catalog import ModelType
from pallas.providers.errors import NoModelError
from pallas.providers.manager import ModelManager
from pallas.store.settings_table import SettingsTable

AUTOMATIC = ""  # no choice: the registration order and failover decide
SCOPE = "global"
CHOSEN_TYPES = (ModelType.CHAT, ModelType.TOOL, ModelType.VISION)


class ModelChoice(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    chat: str = AUTOMATIC
    tool: str = AUTOMATIC
    vision: str = AUTOMATIC


class ModelChoiceStorage(TableStorage):
    """Stored like any section, and handed to the model manager when saved."""

    def __init__(self, table: SettingsTable, manager: ModelManager) -> None:
        super().__init__("models", table)
        self._manager = manager

    async def save(self, scope_id: str, stored: dict[str, Any], now: datetime) -> None:
        await super().save(scope_id, stored, now)
        apply_choice(self._manager, stored)

    async def restore(self) -> None:
        """At start-up: the choice stored last time, where those models still exist."""
        apply_choice(self._manager, await self.load(SCOPE))


def apply_choice(manager: ModelManager, stored: dict[str, Any]) -> None:
    for model_type in CHOSEN_TYPES:
        name = str(stored.get(model_type.value, AUTOMATIC)) or None
        try:
            manager.set_preferred(model_type, name)
        except NoModelError as exc:  # removed from the providers file since: automatic
            logger.warning("models: stored choice for {} ignored: {}", model_type.value, exc)
            manager.set_preferred(model_type, None)


def names_of(manager: ModelManager, model_type: ModelType) -> Callable[[], list[str]]:
    return lambda: [AUTOMATIC, *(m.name for m in manager.catalog.of_type(model_type))]


def models_section(table: SettingsTable, manager: ModelManager) -> Section:
    return Section(
        key="models",
        title="用哪个模型",
        scope=Scope.GLOBAL,
        model=ModelChoice,
        defaults=ModelChoice(),
        storage=ModelChoiceStorage(table, manager),
        titles={"chat": "聊天", "tool": "规划和整理记忆", "vision": "看图"},
        applies="下一次调用起生效",
        helps={"chat": "留空就按 providers 文件的顺序，出错时换下一个"},
        options={t.value: names_of(manager, t) for t in CHOSEN_TYPES},
    )
