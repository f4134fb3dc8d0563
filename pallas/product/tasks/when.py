"""When a reminder is due, read from how people say it (pure; docs/tasks.md).

Accepted: an ISO 8601 time with its offset (`2026-12-04T20:00:00+08:00`); a span from now
(`40秒后`, `20分钟后`, `半小时后`, `2个小时后`, `3天后`); a clock time on a day (`8点`,
`明早8点`, `今晚8点半`, `明天下午3点15分`, `后天9点`), read in the chat's time zone; and a
rhythm (`每天8点`, `每周一9点`). A clock time without a day that has passed today is
tomorrow's. What cannot be read, or is in the past, or too far ahead, is refused with the
reason, in Chinese, for the asker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, time, timedelta, tzinfo

MAX_AHEAD = timedelta(days=366)
_EXAMPLES = "可以说「20分钟后」「明早8点」「每天9点」。"  # the farthest a reminder may be set
WEEKDAYS = "一二三四五六日"
_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6,
           "七": 7, "八": 8, "九": 9}  # fmt: skip
_NUMBER = r"[0-9]{1,4}|[零〇一二两三四五六七八九十]{1,3}"
_SPAN = re.compile(
    rf"^(?P<n>{_NUMBER}|半)\s*(?:个)?\s*(?P<half>半)?\s*(?P<unit>秒钟?|分钟?|小时|钟头|天)"
    r"(?P<after>半)?\s*(?:后|以后|之后)$"
)
_DAY = r"(?P<day>今天|明天|后天)?"
_PART = r"(?P<part>早上|早晨|上午|中午|下午|晚上|傍晚|今早|今晚|明早|明晚|凌晨)?"
_CLOCK = rf"(?P<hour>{_NUMBER})\s*[点:：时]\s*(?:(?P<half>半)|(?P<minute>{_NUMBER})\s*分?)?"
_AT = re.compile(rf"^{_DAY}\s*{_PART}\s*{_CLOCK}$")
_RHYTHM = re.compile(rf"^每(?:天|日|(?:周|星期)(?P<weekday>[{WEEKDAYS}天]))\s*{_PART}\s*{_CLOCK}$")
_SPAN_UNITS = {"秒": 1, "秒钟": 1, "分": 60, "分钟": 60, "小时": 3600, "钟头": 3600, "天": 86400}
_AFTERNOON = ("下午", "晚上", "傍晚", "今晚", "明晚")


@dataclass(frozen=True)
class Rhythm:
    """A repeating reminder: every day, or every week on one weekday, at a clock time."""

    hour: int
    minute: int
    weekday: int | None = None  # Monday 0 ... Sunday 6; None: every day

    def to_json(self) -> dict[str, int | None]:
        return {"hour": self.hour, "minute": self.minute, "weekday": self.weekday}

    @classmethod
    def from_json(cls, data: dict[str, int | None]) -> Rhythm:
        return cls(int(data["hour"] or 0), int(data["minute"] or 0), data.get("weekday"))

    def words(self) -> str:
        day = "每天" if self.weekday is None else f"每周{WEEKDAYS[self.weekday]}"
        return f"{day} {self.hour}:{self.minute:02d}"


@dataclass(frozen=True)
class When:
    at: datetime  # the first time it is due (aware)
    rhythm: Rhythm | None = None


@dataclass(frozen=True)
class Refused:
    reason: str  # one sentence for the asker, in Chinese


def read_when(words: str, now: datetime, zone: tzinfo) -> When | Refused:
    """The time `words` name, seen at `now` (aware) in the chat's time zone."""
    text = words.strip()
    found = _iso(text) or _span(text, now) or _clock_on_day(text, now, zone)
    if found is None:
        rhythm = _rhythm(text)
        if rhythm is None:
            return Refused(
                f"没看懂「{text[:20]}」是什么时候，可以说「20分钟后」「明早8点」「每天9点」。"
            )
        return When(next_due(rhythm, now, zone), rhythm)
    if found <= now:
        return Refused("这个时间已经过去了。")
    if found - now > MAX_AHEAD:
        return Refused("太远了，最多只能提醒一年以内的事。")
    return When(found)


def next_due(rhythm: Rhythm, after: datetime, zone: tzinfo) -> datetime:
    """The rhythm's first time strictly after `after`, in the chat's time zone."""
    local = after.astimezone(zone)
    day = local.date()
    for offset in range(8):
        candidate = datetime.combine(day + timedelta(days=offset), time(rhythm.hour, rhythm.minute),
                                     tzinfo=zone)  # fmt: skip
        weekday_ok = rhythm.weekday is None or candidate.weekday() == rhythm.weekday
        if weekday_ok and candidate > local:
            return candidate
    raise AssertionError("a weekly rhythm always falls within eight days")


def _iso(text: str) -> datetime | None:
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        return None
    return found if found.tzinfo is not None else None  # a time without its offset is unread


def _span(text: str, now: datetime) -> datetime | None:
    match = _SPAN.match(text)
    if match is None:
        return None
    amount = 0.5 if match["n"] == "半" else _number(match["n"])
    if amount is None:
        return None
    seconds = amount * _SPAN_UNITS[match["unit"]]
    if match["half"] or match["after"]:
        seconds += _SPAN_UNITS[match["unit"]] / 2
    return now + timedelta(seconds=seconds)


def _clock_on_day(text: str, now: datetime, zone: tzinfo) -> datetime | None:
    match = _AT.match(text)
    if match is None:
        return None
    clock = _clock(match)
    if clock is None:
        return None
    local = now.astimezone(zone)
    part = match["part"] or ""
    days = {"明天": 1, "后天": 2}.get(match["day"] or "", 1 if part in ("明早", "明晚") else 0)
    found = datetime.combine(local.date() + timedelta(days=days), clock, tzinfo=zone)
    if not match["day"] and not part.startswith(("今", "明")) and found <= local:
        found += timedelta(days=1)  # "8点" said at nine: tomorrow's
    return found


def _rhythm(text: str) -> Rhythm | None:
    match = _RHYTHM.match(text)
    if match is None:
        return None
    clock = _clock(match)
    if clock is None:
        return None
    weekday = match["weekday"]
    day = None if weekday is None else (6 if weekday == "天" else WEEKDAYS.index(weekday))
    return Rhythm(clock.hour, clock.minute, day)


def _clock(match: re.Match[str]) -> time | None:
    hour = _number(match["hour"])
    minute = 30 if match["half"] else (_number(match["minute"]) if match["minute"] else 0)
    if hour is None or minute is None:
        return None
    if (match["part"] or "") in _AFTERNOON and hour < 12:
        hour += 12
    if (match["part"] or "") == "中午" and hour < 11:
        hour += 12
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        return None
    return time(hour, minute)


def _number(text: str) -> int | None:
    """Arabic digits, or a Chinese number up to 99 (十二, 二十, 两)."""
    if text.isdigit():
        return int(text)
    if "十" not in text:
        return _DIGITS.get(text) if len(text) == 1 else None
    tens, _, ones = text.partition("十")
    high = 1 if not tens else _DIGITS.get(tens)
    low = 0 if not ones else _DIGITS.get(ones)
    if high is None or low is None:
        return None
    return high * 10 + low
