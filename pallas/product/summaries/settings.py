"""Summaries' switches for one group (console: 设置 → 聊天总结; chat: /日报)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pallas.product.settings.features import TableStorage
from pallas.product.settings.registry import Scope, Section
from pallas.store.settings_table import SettingsTable

SECTION = "summaries"

# "admins": privately to the group's owner and admins; to the group when QQ refuses that.
DIGEST_TO = ("group", "admins")


class SummaryKnobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    requests_per_hour: int = Field(default=3, ge=0, le=30)
    digest: bool = False
    digest_hour: int = Field(default=22, ge=0, le=23)
    digest_to: Literal["group", "admins"] = "group"


def summaries_section(table: SettingsTable) -> Section:
    return Section(
        key=SECTION,
        title="聊天总结",
        scope=Scope.GROUP,
        model=SummaryKnobs,
        defaults=SummaryKnobs(),
        storage=TableStorage(SECTION, table),
        titles={
            "requests_per_hour": "每小时最多总结几次（/总结、/我错过了什么，主人不算）",
            "digest": "每天发一份当天的聊天日报",
            "digest_hour": "日报几点发（北京时间，0-23）",
            "digest_to": "日报发到哪",
        },
        applies="下一次起生效",
        helps={
            "requests_per_hour": "填 0 就只有主人能要总结",
            "digest_to": "group：发在群里；admins：私聊发给群主和管理员，私聊发不出去就发在群里",
        },
        options={"digest_to": lambda: DIGEST_TO},
    )
