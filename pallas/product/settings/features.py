"""Per-group switches of the features and the group's notices, as settings sections stored
in the `setting` table; the stages ask them on every message (docs/console.md).

  features  (group)  repeat, welcome and farewell notices, sticker replies, memory
  notices   (group)  the welcome and farewell lines

Model chat and joining in uninvited are gate knobs (`gate.model_chat`,
`gate.ambient_probability`), not switches here: the gate is where they act.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pallas.product.settings.registry import Scope, Section
from pallas.store.settings_table import SettingsTable

DEFAULT_WELCOME = "欢迎 {at} 加入本群～"
DEFAULT_FAREWELL = "{name} 离开了本群，有缘再见。"


class Feature(StrEnum):
    REPEAT = "repeat"
    NOTICES = "notices"
    STICKERS = "stickers"
    MEMORY = "memory"


class FeatureSwitches(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    repeat: bool = True
    notices: bool = True
    stickers: bool = True
    memory: bool = True


class NoticeSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    welcome: bool = False
    welcome_text: str = Field(default=DEFAULT_WELCOME, min_length=1, max_length=500)
    farewell: bool = False
    farewell_text: str = Field(default=DEFAULT_FAREWELL, min_length=1, max_length=500)


class TableStorage:
    """A section's values in the `setting` table."""

    def __init__(self, key: str, table: SettingsTable) -> None:
        self._key = key
        self._table = table

    async def load(self, scope_id: str) -> dict[str, Any]:
        return await self._table.load(self._key, scope_id)

    async def save(self, scope_id: str, stored: dict[str, Any], now: datetime) -> None:
        await self._table.save(self._key, scope_id, stored, now)


def features_section(table: SettingsTable) -> Section:
    return Section(
        key="features",
        title="功能开关",
        scope=Scope.GROUP,
        model=FeatureSwitches,
        defaults=FeatureSwitches(),
        storage=TableStorage("features", table),
        titles={
            "repeat": "跟着复读",
            "notices": "欢迎和送别（内容在「进群和退群」里）",
            "stickers": "用表情包回复",
            "memory": "记住大家说的事",
        },
        applies="下一条消息起生效",
        helps={"memory": "关掉后这个群不再记新的事，也不在回复里用记下的事"},
    )


def notices_section(table: SettingsTable) -> Section:
    return Section(
        key="notices",
        title="进群和退群",
        scope=Scope.GROUP,
        model=NoticeSettings,
        defaults=NoticeSettings(),
        storage=TableStorage("notices", table),
        titles={
            "welcome": "欢迎新人",
            "welcome_text": "欢迎词",
            "farewell": "送别退群的人",
            "farewell_text": "送别词",
        },
        applies="下一次有人进出群时生效",
        long_text=frozenset({"welcome_text", "farewell_text"}),
        helps={"welcome_text": "{at} 会换成 @新人，{name} 换成TA的名字"},
    )


class FeatureGate:
    """What the stages ask: is this feature on in this chat; this group's notices."""

    def __init__(self, table: SettingsTable) -> None:
        self._table = table

    async def allows(self, stream_id: int, feature: Feature) -> bool:
        stored = await self._table.load("features", str(stream_id))
        return bool(stored.get(feature.value, True))

    async def notices(self, stream_id: int) -> NoticeSettings | None:
        """The group's stored notices; None when it never set any."""
        stored = await self._table.load("notices", str(stream_id))
        return NoticeSettings.model_validate(stored) if stored else None
