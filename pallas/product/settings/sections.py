"""The sections the core registers: a group's gate knobs and a bot account's persona.
Features register theirs the same way (docs/console.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.gate.policy import GatePolicy
from pallas.product.conversation.gate.policy_book import PolicyBook
from pallas.product.settings.registry import Scope, Section
from pallas.store import kernel_state
from pallas.store.character import CHARACTER_FIELDS, CharacterStore, StoredCharacter

GATE_TITLES = {
    "model_chat": "用模型聊天",
    "must_reply_on_mention": "被 @ 必回",
    "answer_public_questions": "接群里的公开提问",
    "join_hot_conversations": "热闹时插话",
    "natural_window_s": "自己说完后的接话窗口（秒）",
    "follow_up_window_s": "@ 后同一人追问的窗口（秒）",
    "ongoing_exchange_s": "正在来回聊的窗口（秒）",
    "reply_window_s": "频率统计窗口（秒）",
    "max_replies_in_window": "窗口内最多回复几次",
    "poke_window_s": "戳一戳统计窗口（秒）",
    "poke_limit": "窗口内最多理几次戳",
    "hot_window_s": "热闹判断窗口（秒）",
    "hot_min_messages": "算热闹的最少消息数",
    "hot_min_speakers": "算热闹的最少人数",
    "ambient_probability": "没人找时插话的概率",
    "ambient_cooldown_s": "插话冷却（秒）",
    "ambient_hourly_budget": "每小时最多插话几次",
    "quiet_hours": "睡觉时段（HH:MM-HH:MM）",
    "timezone": "时区",
    "muted_until": "安静到（时间）",
}
GATE_HELPS = {
    "muted_until": "群里用「安静 N 分钟」设；留空就不安静",
    "model_chat": "关掉后这个群里不再调用模型（戳回去、复读这些照旧）",
    "max_replies_in_window": "被直接叫到（@、叫名字、回复、戳）不受这个限制",
    "quiet_hours": "每行一段，比如 00:30-08:00；睡觉时只有 @ 会叫醒",
    "ambient_probability": "0 到 1；0 就是从不主动插话",
}


class GateStorage:
    """A group's gate overrides (`stream_policy`), through the policy book so the next
    message already sees them."""

    def __init__(self, engine: AsyncEngine, policies: PolicyBook) -> None:
        self._engine = engine
        self._policies = policies

    async def load(self, scope_id: str) -> dict[str, Any]:
        return dict(await kernel_state.policy_overrides(self._engine, int(scope_id)) or {})

    async def save(self, scope_id: str, stored: dict[str, Any], now: datetime) -> None:
        await self._policies.save(int(scope_id), stored, now)


def gate_section(engine: AsyncEngine, policies: PolicyBook) -> Section:
    return Section(
        key="gate",
        title="什么时候开口",
        scope=Scope.GROUP,
        model=GatePolicy,
        defaults=policies.defaults,
        storage=GateStorage(engine, policies),
        titles=GATE_TITLES,
        applies="下一条消息起生效",
        helps=GATE_HELPS,
    )


class PersonaSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64)
    description: str = Field(default="", max_length=2000)
    style: str = Field(default="", max_length=1000)


class CharacterStorage:
    """A bot account's character (`bot_persona`), seeded from the agent file on first use."""

    def __init__(
        self, store: CharacterStore, seed: StoredCharacter, clock: Callable[[], datetime]
    ) -> None:
        self._store = store
        self._seed = seed
        self._clock = clock

    async def load(self, scope_id: str) -> dict[str, Any]:
        current = await self._store.character(scope_id, self._seed, self._clock())
        values = {f: getattr(current, f) for f in CHARACTER_FIELDS}
        return {f: v for f, v in values.items() if v != getattr(self._seed, f)}

    async def save(self, scope_id: str, stored: dict[str, Any], now: datetime) -> None:
        for name in CHARACTER_FIELDS:
            value = str(stored.get(name, getattr(self._seed, name)))
            await self._store.edit(scope_id, self._seed, name, value, now)


def character_section(
    store: CharacterStore, seed: StoredCharacter, clock: Callable[[], datetime]
) -> Section:
    return Section(
        key="character",
        title="人设",
        scope=Scope.ACCOUNT,
        model=PersonaSettings,
        defaults=PersonaSettings(**seed.__dict__),
        storage=CharacterStorage(store, seed, clock),
        titles={"name": "名字", "description": "是谁", "style": "说话风格"},
        long_text=frozenset({"description", "style"}),
    )
