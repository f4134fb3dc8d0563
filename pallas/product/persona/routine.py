"""The bot's day (pure): what it is doing at a local hour colours its tone; the activity
itself is said only when someone asks what it is up to.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pallas.core.local_time import SHANGHAI

ASK_WORDS = ("在干嘛", "在干什么", "干嘛呢", "在做什么", "忙什么", "忙啥", "在忙吗", "干啥呢")


@dataclass(frozen=True)
class Slot:
    start_hour: int  # local, inclusive
    activity: str
    tone: str


# The default day, from midnight; each slot lasts until the next one starts.
DAY = (
    Slot(0, "熬夜刷手机", "夜深了，有点困，回得短"),
    Slot(2, "睡觉", "迷迷糊糊的，回得很短"),
    Slot(8, "起床吃早饭", "刚醒，慢吞吞的"),
    Slot(10, "摸鱼上网", "状态正常"),
    Slot(12, "吃午饭", "吃着饭，心不在焉"),
    Slot(14, "午后发呆", "有点犯困"),
    Slot(17, "晚饭前闲逛", "状态正常"),
    Slot(19, "打游戏看剧", "兴致不错，话多一点"),
    Slot(23, "准备睡觉", "有点困了"),
)


def slot_at(now: datetime, day: tuple[Slot, ...] = DAY) -> Slot:
    hour = now.astimezone(SHANGHAI).hour
    return [slot for slot in day if slot.start_hour <= hour][-1]


def asked_what_doing(text: str) -> bool:
    return any(word in text for word in ASK_WORDS)


def routine_line(now: datetime, asked: bool) -> str:
    slot = slot_at(now)
    return f"现在在{slot.activity}，{slot.tone}" if asked else slot.tone
