"""Memory's numbers (`memory:` in config/agent.yml) as the console's `memory` section: the
agent file gives the defaults, the console changes them for the next turn, no restart
(docs/memory.md, docs/console.md). `enabled` stays the agent file's (it decides whether the
feature is installed at all); each group switches its memory in 功能开关."""

from __future__ import annotations

from pallas.product.memory.config import MemoryConfig
from pallas.product.settings.applied import Live, applied_section
from pallas.product.settings.registry import Section
from pallas.store.settings_table import SettingsTable

MEMORY_TITLES = {
    "extraction_delay_s": "一轮结束后多少秒开始记",
    "extraction_messages": "每次记忆最多读多少行聊天",
    "extraction_candidates": "每次最多拿几行给模型挑",
    "recall_limit": "每轮最多想起几条记忆",
    "recall_window": "看最近几行判断谁在场",
    "behavior_limit": "每轮最多带几条教过的做法",
    "embedding_timeout_s": "向量模型最多等多少秒",
}
MEMORY_HELPS = {
    "extraction_delay_s": "半分钟内结束的几轮合成一次，只调一次模型",
    "extraction_candidates": "越少越省钱；只有像是在说自己、说约定的行才会被挑出来",
    "recall_limit": "0 就不往提示里放记忆（还会记）",
    "embedding_timeout_s": "超时就只按关键词找",
}


def memory_section(table: SettingsTable, live: Live[MemoryConfig]) -> Section:
    """Memory's numbers; its parts read them through `live` where they act."""
    return applied_section("memory", "记忆", table, live, MEMORY_TITLES, MEMORY_HELPS)
