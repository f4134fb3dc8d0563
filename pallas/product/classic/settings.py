"""Learned lines' switches for one group (console: 设置 → 学说话; docs/classic.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pallas.product.classic.lines import AnswerRules
from pallas.product.settings.features import TableStorage
from pallas.product.settings.registry import Scope, Section
from pallas.store.settings_table import SettingsTable

SECTION = "classic"


class ClassicKnobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    learn: bool = True
    answer: bool = True
    min_count: int = Field(default=3, ge=1, le=100)
    min_answerers: int = Field(default=2, ge=1, le=20)
    chance_per_sighting: float = Field(default=0.1, ge=0, le=0.5)
    other_groups_min_count: int = Field(default=10, ge=1, le=1000)
    cooldown_s: float = Field(default=30, ge=0, le=3600)
    ban_words: tuple[str, ...] = Field(default=("不可以",), min_length=1, max_length=20)

    def rules(self) -> AnswerRules:
        return AnswerRules(
            self.min_count, self.min_answerers, self.chance_per_sighting,
            self.other_groups_min_count, self.cooldown_s,
        )  # fmt: skip


def classic_section(table: SettingsTable) -> Section:
    return Section(
        key=SECTION,
        title="学说话",
        scope=Scope.GROUP,
        model=ClassicKnobs,
        defaults=ClassicKnobs(),
        storage=TableStorage(SECTION, table),
        titles={
            "learn": "从群里学怎么接话",
            "answer": "用学来的话接话",
            "min_count": "一句接话至少见过几次才一定接",
            "min_answerers": "而且至少几个人这么接过",
            "chance_per_sighting": "没到上面两条的，每见过一次加多少概率（最多 0.5）",
            "other_groups_min_count": "别的群学来的，至少见过几次才用",
            "cooldown_s": "两次学来的接话至少隔多久（秒）",
            "ban_words": "禁用词（群主、管理员或主人回复我这句话，就不再这么说）",
        },
        applies="下一条消息起生效",
        helps={
            "chance_per_sighting": "填 0 就只用见得够多的",
            "ban_words": "每行一个；要整句就是这个词，一句话里带着它不算",
        },
    )
