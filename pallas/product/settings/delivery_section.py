"""How replies go out (the outbox's pacing) as a settings section: the console changes it
and the dispatcher uses it from its next send, no restart (docs/console.md, docs/delivery.md).

Only the knobs an owner has a reason to turn: how human the typing looks, how fast a backlog
drains, how long a reply may wait. Retries and timeouts stay the dispatcher's own."""

from __future__ import annotations

from dataclasses import replace

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

from pallas.product.conversation.delivery.pacing import DeliveryPolicy
from pallas.product.settings.applied import Live, applied_section
from pallas.product.settings.registry import Section
from pallas.store.settings_table import SettingsTable


class Pacing(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    chars_per_second: float = Field(default=8.0, ge=1, le=100)
    min_pause_s: float = Field(default=0.8, ge=0, le=10)
    max_pause_s: float = Field(default=4.0, ge=0, le=30)
    stream_interval_s: float = Field(default=1.0, ge=0, le=30)
    global_per_second: float = Field(default=2.0, ge=0.1, le=20)
    global_burst: int = Field(default=5, ge=1, le=50)
    stale_after_s: float = Field(default=600.0, ge=30, le=3600)
    max_waiting_unsolicited: int = Field(default=2, ge=1, le=10)
    account_per_minute: int = Field(default=20, ge=0, le=120)
    account_per_hour: int = Field(default=300, ge=0, le=3000)
    same_text_hold_s: float = Field(default=120.0, ge=0, le=3600)
    same_text_min_chars: int = Field(default=8, ge=1, le=500)
    new_group_hours: float = Field(default=24.0, ge=0, le=720)
    new_group_per_hour: int = Field(default=20, ge=0, le=600)

    @field_validator("max_pause_s")
    @classmethod
    def _not_below_min(cls, value: float, info: ValidationInfo) -> float:
        lower = info.data.get("min_pause_s")
        if lower is not None and value < lower:
            raise ValueError(f"不能小于「气泡之间最短停多久」（{lower:g} 秒）")
        return value


def pacing_of(policy: DeliveryPolicy) -> Pacing:
    """The defaults as they are: a kernel may be built with pacing beyond what the console
    offers (a test's instant sends); only what an owner changes is checked."""
    return Pacing.model_construct(**{name: getattr(policy, name) for name in Pacing.model_fields})


class LivePacing:
    """The pacing the dispatcher reads at every send: the kernel's policy with what the
    console saved over it (worked out again only when that changed)."""

    def __init__(self, base: DeliveryPolicy) -> None:
        self.base = base
        self.live = Live(pacing_of(base))
        self._from: Pacing | None = self.live()
        self._policy = base

    def __call__(self) -> DeliveryPolicy:
        pacing = self.live()
        if pacing is not self._from:
            self._from, self._policy = pacing, replace(self.base, **pacing.model_dump())
        return self._policy


def delivery_section(table: SettingsTable, pacing: LivePacing) -> Section:
    return applied_section(
        "delivery",
        "发消息的节奏",
        table,
        pacing.live,
        {
            "chars_per_second": "打字速度（每秒几个字）",
            "min_pause_s": "气泡之间最短停多久（秒）",
            "max_pause_s": "气泡之间最长停多久（秒）",
            "stream_interval_s": "同一个聊天两条消息至少隔多久（秒）",
            "global_per_second": "所有聊天合起来每秒最多发几条",
            "global_burst": "积压时一口气最多连发几条",
            "stale_after_s": "多久没发出去就不发了（秒）",
            "max_waiting_unsolicited": "一个聊天最多排着几条没人叫也要说的话",
            "account_per_minute": "一个 QQ 号每分钟最多发几条（所有聊天合计）",
            "account_per_hour": "一个 QQ 号每小时最多发几条（所有聊天合计）",
            "same_text_hold_s": "同样的话发到另一个群前至少等多久（秒）",
            "same_text_min_chars": "多长的话才算「同样的话」（字数）",
            "new_group_hours": "新群的适应期（小时）",
            "new_group_per_hour": "适应期内每小时最多往这个群发几条",
        },
        {
            "chars_per_second": "第二条气泡起，停顿是它的字数除以打字速度，再夹在最短和最长之间",
            "stale_after_s": "回复晚了就不合时宜了：过了这么久还没发出去的，直接放弃",
            "max_waiting_unsolicited": "被 @ 的回复不受这个限制；更早的那些会被丢掉",
            "account_per_minute": "风控看的是整个号：群再多，合起来也不能刷屏。填 0 表示不限",
            "account_per_hour": "填 0 表示不限",
            "same_text_hold_s": "同一段话短时间内出现在好几个群，最像群发广告；指令的回答不受限",
            "new_group_hours": "从第一次在这个群里看到消息算起；填 0 表示没有适应期",
            "new_group_per_hour": "填 0 表示不限；等得太久的消息按上面的规则放弃",
        },
    )
