"""The slang feature's keys of config/agent.yml (`slang:`) and its per-group switches
(console: 设置 → 群里的说法); every field has a safe default (docs/slang.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pallas.product.settings.features import TableStorage
from pallas.product.settings.registry import Scope, Section
from pallas.store.settings_table import SettingsTable

SECTION = "slang"


class SlangConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    min_lines: int = Field(default=3, ge=2, le=100)  # lines a term is used in before learning
    min_members: int = Field(default=2, ge=1, le=20)  # by this many people
    terms_per_run: int = Field(default=5, ge=1, le=20)  # offered to one extraction call
    terms_per_turn: int = Field(default=5, ge=1, le=20)  # meanings shown to one turn
    samples_per_reply: int = Field(default=3, ge=0, le=3)
    private_samples: bool = False  # samples in private chats too (a group's switch is below)
    # Where memory's extraction does not run: the feature's own learning run comes this long
    # after a turn (turns within the same minute share it).
    learn_delay_s: int = Field(default=20, ge=0, le=600)


class SlangKeys(BaseModel):
    """The feature's keys of config/agent.yml (its `Extension.config`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slang: SlangConfig = Field(default_factory=SlangConfig)


class SlangSwitches(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    learn: bool = True
    samples: bool = True


def slang_section(table: SettingsTable) -> Section:
    return Section(
        key=SECTION,
        title="群里的说法",
        scope=Scope.GROUP,
        model=SlangSwitches,
        defaults=SlangSwitches(),
        storage=TableStorage(SECTION, table),
        titles={
            "learn": "学群里的黑话（外号、梗、缩写），聊到时心里有数",
            "samples": "回话时参考群友平时的说话方式",
        },
        applies="下一轮起生效",
        helps={
            "learn": "关掉后不再学新的词；已经学会的还会用，/黑话 里可以删",
            "samples": "只在决定要说话时用两三句，不会照抄",
        },
    )
