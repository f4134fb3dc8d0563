"""Reading when a reminder is due (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from pallas.product.tasks.when import Refused, Rhythm, When, next_due, read_when

SHANGHAI = ZoneInfo("Asia/Shanghai")
# Friday 2026-12-04, 21:30 in Shanghai.
NOW = datetime(2026, 12, 4, 21, 30, tzinfo=SHANGHAI).astimezone(UTC)


def at(words: str) -> datetime:
    found = read_when(words, NOW, SHANGHAI)
    assert isinstance(found, When), found
    return found.at.astimezone(SHANGHAI)


@pytest.mark.parametrize(
    ("words", "later"),
    [
        ("40秒后", timedelta(seconds=40)),
        ("20分钟后", timedelta(minutes=20)),
        ("5分后", timedelta(minutes=5)),
        ("半小时后", timedelta(minutes=30)),
        ("2个小时后", timedelta(hours=2)),
        ("两小时后", timedelta(hours=2)),
        ("1个半小时后", timedelta(hours=1, minutes=30)),
        ("三天后", timedelta(days=3)),
        ("十五分钟以后", timedelta(minutes=15)),
    ],
)
def test_a_span_from_now(words: str, later: timedelta) -> None:
    assert at(words) == (NOW + later).astimezone(SHANGHAI)


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("明早8点", datetime(2026, 12, 5, 8, 0)),
        ("明天下午3点15分", datetime(2026, 12, 5, 15, 15)),
        ("今晚10点半", datetime(2026, 12, 4, 22, 30)),
        ("后天9点", datetime(2026, 12, 6, 9, 0)),
        ("8点", datetime(2026, 12, 5, 8, 0)),  # passed today: tomorrow's
        ("23点", datetime(2026, 12, 4, 23, 0)),
        ("晚上十一点", datetime(2026, 12, 4, 23, 0)),
        ("22:45", datetime(2026, 12, 4, 22, 45)),
        ("2026-12-05T20:00:00+08:00", datetime(2026, 12, 5, 20, 0)),
    ],
)
def test_a_clock_time_in_the_chat_s_zone(words: str, expected: datetime) -> None:
    assert at(words) == expected.replace(tzinfo=SHANGHAI)


def test_a_rhythm_and_its_next_times() -> None:
    daily = read_when("每天8点", NOW, SHANGHAI)
    assert isinstance(daily, When) and daily.rhythm == Rhythm(8, 0)
    assert daily.at == datetime(2026, 12, 5, 8, 0, tzinfo=SHANGHAI)
    monday = read_when("每周一早上9点半", NOW, SHANGHAI)
    assert isinstance(monday, When) and monday.rhythm == Rhythm(9, 30, 0)
    assert monday.at == datetime(2026, 12, 7, 9, 30, tzinfo=SHANGHAI)
    # One a day, never twice for one day, whatever moment it is asked at.
    times = [daily.at]
    for _ in range(3):
        times.append(next_due(daily.rhythm, times[-1], SHANGHAI))
    assert [t.day for t in times] == [5, 6, 7, 8]
    assert next_due(Rhythm(8, 0), times[0] - timedelta(seconds=1), SHANGHAI) == times[0]


@pytest.mark.parametrize(
    ("words", "reason"),
    [
        ("每秒", "没看懂"),
        ("1970-01-01T00:00:00+08:00", "过去"),
        ("3000-01-01T00:00:00+08:00", "太远"),
        ("400天后", "太远"),
        ("25点", "没看懂"),
        ("2026-12-05T20:00:00", "没看懂"),  # no offset: which zone is meant is unknown
        ("", "没看懂"),
    ],
)
def test_what_cannot_be_set_is_refused_in_one_sentence(words: str, reason: str) -> None:
    found = read_when(words, NOW, SHANGHAI)
    assert isinstance(found, Refused) and reason in found.reason
