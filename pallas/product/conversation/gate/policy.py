"""Gate and scheduling knobs: typed, documented defaults, overridable per group in the store.

Every field is explained for group owners in docs/gating.md.
"""

from __future__ import annotations

import re
from datetime import datetime, time
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

MAX_WINDOW_S = 3600  # the activity view remembers one hour; no window may look further back
_RANGE = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")


class GatePolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model_chat: bool = True  # false: no model turns in this chat (responders still answer)
    must_reply_on_mention: bool = True
    poke_window_s: float = Field(300, gt=0, le=MAX_WINDOW_S)
    poke_limit: int = Field(3, ge=0)
    natural_window_s: float = Field(90, ge=0, le=MAX_WINDOW_S)
    follow_up_window_s: float = Field(60, ge=0, le=MAX_WINDOW_S)
    ongoing_exchange_s: float = Field(120, ge=0, le=MAX_WINDOW_S)
    reply_window_s: float = Field(600, gt=0, le=MAX_WINDOW_S)
    max_replies_in_window: int = Field(8, ge=0)
    answer_public_questions: bool = True
    join_hot_conversations: bool = False
    hot_window_s: float = Field(60, gt=0, le=MAX_WINDOW_S)
    hot_min_messages: int = Field(12, ge=2)
    hot_min_speakers: int = Field(3, ge=2)
    ambient_probability: float = Field(0.02, ge=0, le=1)
    ambient_cooldown_s: float = Field(900, ge=0)
    ambient_hourly_budget: int = Field(2, ge=0)
    quiet_hours: tuple[str, ...] = ()
    timezone: str = "Asia/Shanghai"
    # Muted until this moment (ISO 8601 with its offset; empty: not muted), by an admin's
    # 安静 N 分钟: nothing, not even an @, gets a model turn before it.
    muted_until: str = ""

    @field_validator("quiet_hours")
    @classmethod
    def _ranges(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if not _RANGE.match(item):
                # The console shows this to the owner as is: in Chinese.
                raise ValueError(f"要写成 HH:MM-HH:MM，比如 00:30-08:00（收到 {item!r}）")
        return value

    @field_validator("muted_until")
    @classmethod
    def _moment(cls, value: str) -> str:
        if value and muted_moment(value) is None:
            example = "2026-12-02T20:00:00+08:00"
            raise ValueError(f"要写成带时区的时间，比如 {example}（收到 {value!r}）")
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"不认识的时区 {value!r}") from None
        return value

    def with_overrides(self, overrides: dict[str, Any]) -> GatePolicy:
        """This policy with a group's stored overrides applied; invalid ones raise."""
        return GatePolicy.model_validate(self.model_dump() | overrides)


def muted_moment(value: str) -> datetime | None:
    """The moment a mute ends, or None when `value` is not an aware ISO time."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def is_muted(now: datetime, policy: GatePolicy) -> bool:
    end = muted_moment(policy.muted_until) if policy.muted_until else None
    return end is not None and now < end


def is_quiet_time(now: datetime, policy: GatePolicy) -> bool:
    """Whether `now` (aware) falls in one of the policy's quiet ranges, in its time zone."""
    local = now.astimezone(ZoneInfo(policy.timezone)).time()
    return any(_in_range(local, item) for item in policy.quiet_hours)


def _in_range(moment: time, item: str) -> bool:
    start_text, end_text = item.split("-")
    start, end = time.fromisoformat(start_text), time.fromisoformat(end_text)
    if start <= end:
        return start <= moment < end
    return moment >= start or moment < end  # a range across midnight


def effective_policy(
    defaults: GatePolicy, overrides: dict[str, Any] | None
) -> tuple[GatePolicy, str | None]:
    """Apply overrides; on invalid overrides keep the defaults and say why."""
    if not overrides:
        return defaults, None
    try:
        return defaults.with_overrides(overrides), None
    except ValidationError as exc:
        return defaults, f"invalid group overrides ignored: {exc.errors()[0]['msg']}"
