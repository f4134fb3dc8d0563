"""When the daily digest is due, and the /日报 switch's words (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pallas.product.summaries.commands import digest_change, digest_words
from pallas.product.summaries.digest import (
    LATE_HOURS,
    digest_key,
    digests_due,
    hours_due,
    valid_knobs,
)
from pallas.product.summaries.settings import SummaryKnobs

FIRE = datetime(2026, 12, 6, 14, 0, tzinfo=UTC)  # 22:00 in Shanghai


def test_an_on_time_tick_covers_its_hour_and_a_late_one_the_missed_hours() -> None:
    assert hours_due(FIRE, FIRE + timedelta(seconds=3)) == [FIRE]
    late = hours_due(FIRE, FIRE + timedelta(hours=2, minutes=5))
    assert late == [FIRE, FIRE + timedelta(hours=1), FIRE + timedelta(hours=2)]
    long_stop = hours_due(FIRE, FIRE + timedelta(days=5, minutes=3))
    assert len(long_stop) == LATE_HOURS  # the latest day's hours, not the first day after it
    assert long_stop[-1] == FIRE + timedelta(days=5)
    assert long_stop[0] == FIRE + timedelta(days=4, hours=1)


def test_groups_whose_digest_is_on_at_that_hour() -> None:
    groups = {"1": SummaryKnobs(digest=True, digest_hour=22),
              "2": SummaryKnobs(digest=True, digest_hour=23),
              "3": SummaryKnobs(digest=False, digest_hour=22)}  # fmt: skip
    assert digests_due(groups, [FIRE]) == [(1, FIRE)]
    later = FIRE + timedelta(hours=1)
    assert digests_due(groups, [FIRE, later]) == [(1, FIRE), (2, later)]


def test_a_day_is_the_local_date() -> None:
    assert digest_key(5, FIRE) == "digest:5:2026-12-06"
    assert digest_key(5, FIRE + timedelta(hours=2)) == "digest:5:2026-12-07"  # 00:00 local


def test_stored_values_out_of_bounds_are_skipped() -> None:
    stored = {"1": {"digest": True}, "2": {"digest_hour": 99}, "global": {"digest": True}}
    assert list(valid_knobs(stored)) == ["1"]


def test_the_switch_words() -> None:
    assert digest_change("") == {}
    assert digest_change("开") == {"digest": True}
    assert digest_change("开 21点") == {"digest": True, "digest_hour": 21}
    assert digest_change("开 8") == {"digest": True, "digest_hour": 8}
    assert digest_change("关") == {"digest": False}
    assert digest_change("私聊管理员") == {"digest_to": "admins"}
    assert digest_change("发群里") == {"digest_to": "group"}
    for bad in ("开 25点", "开 晚上", "关 现在", "随便"):
        assert digest_change(bad) is None, bad
    assert "没开" in digest_words(SummaryKnobs())
    on = digest_words(SummaryKnobs(digest=True, digest_hour=9, digest_to="admins"))
    assert "9 点私聊" in on
