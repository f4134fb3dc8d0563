"""How the day's model budget is shared out, as settings sections (docs/cost.md): when work
nobody waits for stops, when a cheaper model answers first, what each purpose and each group
may use. The caps themselves are `.env`'s (PALLAS_DAILY_BUDGET / _TOKEN_BUDGET) or an owner's
for today (/预算, the console's 模型 page); these are shares of them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pallas.product.settings.applied import AppliedStorage, Live
from pallas.product.settings.features import TableStorage
from pallas.product.settings.registry import Scope, Section
from pallas.providers.budget import GroupShare, Shares
from pallas.providers.catalog import ModelType
from pallas.providers.manager import ModelManager
from pallas.store.settings_table import SettingsTable

GROUP_SECTION = "group_budget"
# Which calls each share field covers (providers.results.Purpose values).
PURPOSE_FIELDS = {
    "decision_percent": ("decision", "reply", "tool"),
    "extraction_percent": ("extraction",),
    "summary_percent": ("summary",),
    "vision_percent": ("vision",),
    "speech_percent": ("speech", "transcription"),
}


class BudgetShares(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ambient_stop_percent: int = Field(default=80, ge=0, le=100)
    cheaper_model: str = ""
    cheaper_from_percent: int = Field(default=90, ge=0, le=100)
    decision_percent: int = Field(default=100, ge=0, le=100)
    extraction_percent: int = Field(default=100, ge=0, le=100)
    summary_percent: int = Field(default=100, ge=0, le=100)
    vision_percent: int = Field(default=100, ge=0, le=100)
    speech_percent: int = Field(default=100, ge=0, le=100)


class GroupBudget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    percent_of_daily: int = Field(default=100, ge=0, le=100)


def shares_of(knobs: BudgetShares) -> Shares:
    purposes = tuple(
        (covered, getattr(knobs, name) / 100)
        for name, covered in PURPOSE_FIELDS.items()
        if getattr(knobs, name) < 100
    )
    return Shares(
        ambient=knobs.ambient_stop_percent / 100,
        cheaper_from=knobs.cheaper_from_percent / 100,
        cheaper_model=knobs.cheaper_model,
        purposes=purposes,
    )


def budget_section(table: SettingsTable, live: Live[BudgetShares], models: ModelManager) -> Section:
    chat_models = [m.name for m in models.catalog.of_type(ModelType.CHAT)]
    return Section(
        key="budget",
        title="预算怎么分",
        scope=Scope.GLOBAL,
        model=BudgetShares,
        defaults=live.base,
        storage=AppliedStorage("budget", table, live),
        titles={
            "ambient_stop_percent": "花到上限的百分之几，停掉没人等的活（整理记忆、总结、看图）",
            "cheaper_model": "快到上限时先用的便宜模型",
            "cheaper_from_percent": "花到上限的百分之几，换便宜模型",
            "decision_percent": "回话最多用上限的百分之几",
            "extraction_percent": "整理记忆最多用上限的百分之几",
            "summary_percent": "总结最多用上限的百分之几",
            "vision_percent": "看图最多用上限的百分之几",
            "speech_percent": "语音最多用上限的百分之几",
        },
        applies="下一次调用起生效",
        helps={
            "ambient_stop_percent": "只在设了每日预算时起作用；剩下的留给回答被叫到的人",
            "cheaper_model": "留空就不换；换的模型也要能做这次调用（比如要调用工具）",
            "decision_percent": "100 表示不单独限制",
        },
        options={"cheaper_model": lambda: ["", *chat_models]},
        current=live,
    )


def group_budget_section(table: SettingsTable) -> Section:
    return Section(
        key=GROUP_SECTION,
        title="这个群的预算",
        scope=Scope.GROUP,
        model=GroupBudget,
        defaults=GroupBudget(),
        storage=TableStorage(GROUP_SECTION, table),
        titles={"percent_of_daily": "这个群最多用每日上限的百分之几"},
        applies="下一次调用起生效",
        helps={"percent_of_daily": "100 表示不单独限制；到了这个群就先歇着，别的群照常"},
    )


def group_share_reader(table: SettingsTable) -> GroupShare:
    async def share(stream_id: int) -> float:
        stored = await table.load(GROUP_SECTION, str(stream_id))
        return int(stored.get("percent_of_daily", 100)) / 100

    return share
