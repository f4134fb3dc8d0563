"""The persona's agent-file knobs as console sections (`rage`, `follow_up`, `promises`):
the agent file gives the defaults, the console changes them for the next message, no
restart (docs/persona.md, docs/console.md)."""

from __future__ import annotations

from dataclasses import dataclass

from pallas.product.persona.config import FollowUpConfig, PromiseConfig, RageConfig
from pallas.product.settings.applied import Live, applied_section
from pallas.product.settings.registry import Section
from pallas.store.settings_table import SettingsTable

RAGE_TITLES = {
    "enabled": "注意有人骂它",
    "threshold": "怒气到多少就不理这个人",
    "half_life_minutes": "怒气多少分钟减半",
    "silence_minutes": "不理多少分钟",
    "escalate_within_hours": "多少小时内第二次不理就拉黑",
    "notify_check_s": "私聊没通知到群主，多少秒后改发邮件",
    "model_judgement": "模型觉得被冒犯也算",
}
RAGE_HELPS = {
    "enabled": "关掉后骂它也不记；已经在生效的不理和黑名单照旧",
    "threshold": "一句辱骂加 4，一句贬低加 2",
    "notify_check_s": "邮件用 .env 里的 PALLAS_SMTP_*",
}
FOLLOW_UP_TITLES = {
    "enabled": "私聊回完之后，过一会儿再找对方说一次",
    "min_minutes": "最早多少分钟后",
    "max_minutes": "最晚多少分钟后",
    "at_night": "睡觉时段也可以",
}
FOLLOW_UP_HELPS = {"enabled": "只有一次机会；对方先说话就取消"}
PROMISE_TITLES = {
    "enabled": "答应主人的事记下来",
    "shown": "提示里最多带几条没办完的",
    "keep_days": "没定时间的承诺多少天后忘掉",
}
PROMISE_HELPS = {"enabled": "只有主人（SUPERUSERS）能让它答应事情"}


@dataclass(frozen=True)
class PersonaKnobs:
    """The sections' current values, as persona's parts read them where they act."""

    rage: Live[RageConfig]
    follow_up: Live[FollowUpConfig]
    promises: Live[PromiseConfig]


def persona_sections(table: SettingsTable, knobs: PersonaKnobs) -> list[Section]:
    return [
        applied_section("rage", "怒气和不理人", table, knobs.rage, RAGE_TITLES, RAGE_HELPS),
        applied_section("follow_up", "私聊后再开口", table, knobs.follow_up,
                        FOLLOW_UP_TITLES, FOLLOW_UP_HELPS),
        applied_section("promises", "答应主人的事", table, knobs.promises,
                        PROMISE_TITLES, PROMISE_HELPS),
    ]  # fmt: skip
