"""What may leave the bot, as a settings section (docs/delivery.md, "Outgoing safety"): the
link rule and its allow list. The word list and the number rules always hold."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pallas.product.conversation.delivery.safety import LinkRule
from pallas.product.settings.applied import Live, applied_section
from pallas.product.settings.registry import Section
from pallas.store.settings_table import SettingsTable


class OutgoingSafety(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hide_links: bool = False
    allowed_link_hosts: tuple[str, ...] = Field(default=(), max_length=100)

    @field_validator("allowed_link_hosts")
    @classmethod
    def _hosts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        hosts = tuple(item.strip().lower() for item in value if item.strip())
        for host in hosts:
            if "/" in host or " " in host or "." not in host:
                raise ValueError(f"要写网站的域名，比如 bilibili.com（收到 {host!r}）")
        return hosts


def link_rule_of(live: Live[OutgoingSafety]) -> LinkRule:
    safety = live()
    return LinkRule(safety.hide_links, safety.allowed_link_hosts)


def outgoing_section(table: SettingsTable, live: Live[OutgoingSafety]) -> Section:
    return applied_section(
        "outgoing",
        "发出去的内容",
        table,
        live,
        {
            "hide_links": "隐藏链接",
            "allowed_link_hosts": "可以发的网站（每行一个域名）",
        },
        {
            "hide_links": "打开后，机器人发的链接除了下面这些网站的，都换成「[链接已隐藏]」",
            "allowed_link_hosts": "写 bilibili.com 也放行它的子域名，比如 www.bilibili.com",
        },
    )
