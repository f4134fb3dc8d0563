"""Which tools one turn offers the model (pure).

Visible tools come with their intent domain; deferred tools only when their own hints are
said or `tools.find` activated them for this conversation; rare plugin functions only
through `call`. Inventory talk ("你会啥") brings in `tools.find` and the read-only tools of the
domains in question, so the bot lists real abilities instead of inventing them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pallas.product.llm.tools.base import ToolSpec, Visibility
from pallas.product.llm.tools.book import Candidate

FIND = "tools.find"
CALL = "call"

DOMAIN_WORDS: dict[str, tuple[str, ...]] = {
    "web": ("搜", "查一下", "查查", "网页", "链接", "网址", "http", "新闻", "最新", "百度", "谷歌"),
    "time": ("几点", "时间", "日期", "今天", "明天", "昨天", "星期", "几号", "周几"),
    "chat": ("之前", "上次", "刚才", "记录", "聊过", "说过", "谁说", "以前"),
    "skills": ("怎么用", "教程", "说明", "规则", "玩法"),
    "memory": ("记得", "记住", "记错", "忘掉", "忘了", "别记", "记忆", "关于我"),
}
INVENTORY = re.compile(
    r"你(都|还)?(会|能)(干|做)?(啥|什么|些什么|哪些)|有(哪些|什么)(功能|本事|能力|工具)"
    r"|能(干|做)(啥|嘛|什么)|会不会.{0,8}吗|能不能.{0,8}吗"
)


@dataclass(frozen=True)
class Offer:
    tools: tuple[ToolSpec, ...]  # offered directly this turn, in registry order
    call_available: bool  # some rare function is available: `call` is offered
    inventory: bool
    domains: frozenset[str]

    def names(self) -> frozenset[str]:
        return frozenset(spec.name for spec in self.tools)


def intent_domains(text: str) -> frozenset[str]:
    lowered = text.lower()
    found = {d for d, words in DOMAIN_WORDS.items() if any(w in lowered for w in words)}
    return frozenset({"general", *found})


def hints_match(spec: ToolSpec, text: str) -> bool:
    lowered = text.lower()
    return any(hint and hint.lower() in lowered for hint in spec.hints)


def select_tools(candidates: Sequence[Candidate], text: str, activated: frozenset[str]) -> Offer:
    inventory = bool(INVENTORY.search(text))
    domains = intent_domains(text)
    # Asked what it can do without a topic: every domain's read-only tools are in question.
    asked = domains if len(domains) > 1 else frozenset(DOMAIN_WORDS) | {"general"}
    chosen: list[ToolSpec] = []
    deferred_left = False
    for candidate in candidates:
        spec = candidate.spec
        if not candidate.availability.available or candidate.rare or spec.name == FIND:
            continue
        if _offered(spec, text, activated, domains, inventory, asked):
            chosen.append(spec)
        elif spec.visibility is Visibility.DEFERRED:
            deferred_left = True
    call_available = any(c.rare and c.availability.available for c in candidates)
    find = next((c for c in candidates if c.spec.name == FIND), None)
    if find and find.availability.available and (inventory or deferred_left or call_available):
        chosen.insert(0, find.spec)
    return Offer(tuple(chosen), call_available, inventory, domains)


def _offered(
    spec: ToolSpec,
    text: str,
    activated: frozenset[str],
    domains: frozenset[str],
    inventory: bool,
    asked: frozenset[str],
) -> bool:
    in_domain = bool(set(spec.domains) & domains)
    if spec.visibility is Visibility.VISIBLE:
        return in_domain or (inventory and spec.read_only and bool(set(spec.domains) & asked))
    if spec.name in activated or hints_match(spec, text):
        return True
    return inventory and spec.read_only and bool(set(spec.domains) & asked)
