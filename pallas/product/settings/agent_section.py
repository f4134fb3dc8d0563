"""The agent's reply limits as a settings section: the agent file gives the defaults, the
console changes them for the next turn, no restart (docs/console.md, docs/agent.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pallas.product.llm.agent.config import AgentConfig
from pallas.product.settings.applied import Live
from pallas.product.settings.features import TableStorage
from pallas.product.settings.registry import Scope, Section
from pallas.store.settings_table import SettingsTable

SCOPE = "global"


class ReplyLimits(BaseModel):
    """The agent file's own bounds (AgentConfig), for the fields a turn reads each time."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    context_token_budget: int = Field(default=3000, ge=200, le=100_000)
    max_bubbles: int = Field(default=4, ge=1, le=10)
    reply_max_chars: int = Field(default=600, ge=20, le=5000)
    tool_call_budget: int = Field(default=3, ge=0, le=8)
    max_rounds: int = Field(default=5, ge=2, le=10)
    split_reply: bool = False
    fallback_reply: str = Field(default="", max_length=500)


def limits_of(config: AgentConfig) -> ReplyLimits:
    return ReplyLimits(**{name: getattr(config, name) for name in ReplyLimits.model_fields})


class ReplyLimitsStorage(TableStorage):
    """Stored like any section; the agent reads the limits through `live` at every turn
    (kept current when saved and at every start)."""

    def __init__(self, table: SettingsTable, live: Live[AgentConfig]) -> None:
        super().__init__("agent", table)
        self._live = live

    async def save(self, scope_id: str, stored: dict[str, Any], now: datetime) -> None:
        await super().save(scope_id, stored, now)
        self._live._take(self._live.base.model_copy(update=stored))

    async def restore(self) -> None:
        stored = await self.load(SCOPE)
        if stored:
            self._live._take(self._live.base.model_copy(update=stored))


def agent_section(table: SettingsTable, live: Live[AgentConfig]) -> Section:
    """`live` starts as the agent file's config; the agent asks it at every turn."""
    return Section(
        key="agent",
        title="每一轮的限度",
        scope=Scope.GLOBAL,
        model=ReplyLimits,
        defaults=limits_of(live.base),
        storage=ReplyLimitsStorage(table, live),
        current=live,
        titles={
            "context_token_budget": "每轮给模型看多少上下文（估算的 token）",
            "max_bubbles": "一次最多几条气泡",
            "reply_max_chars": "一次最多多少字",
            "tool_call_budget": "一轮最多用几次工具",
            "max_rounds": "一次决定最多调用模型几次",
            "split_reply": "分两步：tool 模型决定，chat 模型写回复",
            "fallback_reply": "模型都不可用时的回复",
        },
        applies="下一轮生效",
        helps={
            "context_token_budget": (
                "越小越省钱；放不下时先舍掉最早的聊天记录，这一轮要回的新消息从不舍掉"
            ),
            "max_rounds": "工具调用和一次修正都算在内",
            "split_reply": "要在模型配置里同时有 tool 和 chat 模型，否则还是一步",
            "fallback_reply": "留空就什么都不说",
        },
    )
