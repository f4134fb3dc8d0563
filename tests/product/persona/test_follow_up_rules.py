"""The private follow-up as pure rules: when its chance comes, whether it is still there, and
the knobs that bound it."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from pallas.product.persona.config import FollowUpConfig
from pallas.product.persona.follow_up import FollowUpVerdict, follow_up_delay, judge_follow_up
from pallas.product.persona.promise_store import SaidSince

V = FollowUpVerdict
NOON = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)  # 12:00 in Shanghai
NOTHING = SaidSince(theirs=0, bots=0)


def shanghai(hour: int, minute: int = 0) -> datetime:
    """That hour of 2026-12-02 in Shanghai (UTC+8), given in UTC."""
    return datetime(2026, 12, 2, 0, 0, tzinfo=UTC) + timedelta(hours=hour - 8, minutes=minute)


@pytest.mark.parametrize("seed", range(20))
def test_the_delay_falls_within_the_configured_range(seed: int) -> None:
    config = FollowUpConfig(min_minutes=20, max_minutes=60)
    delay = follow_up_delay(config, random.Random(seed))
    assert timedelta(minutes=20) <= delay <= timedelta(minutes=60)


def test_the_delay_is_drawn_from_the_randomness_passed_in() -> None:
    config = FollowUpConfig()
    assert follow_up_delay(config, random.Random(1)) == follow_up_delay(config, random.Random(1))
    assert follow_up_delay(config, random.Random(1)) != follow_up_delay(config, random.Random(2))


def test_equal_bounds_give_exactly_that_delay() -> None:
    config = FollowUpConfig(min_minutes=30, max_minutes=30)
    for seed in range(5):
        assert follow_up_delay(config, random.Random(seed)) == timedelta(minutes=30)


@pytest.mark.parametrize(
    ("said", "now", "at_night", "verdict"),
    [
        (SaidSince(theirs=1, bots=0), NOON, False, V.THEY_SPOKE),
        (SaidSince(theirs=2, bots=3), NOON, False, V.THEY_SPOKE),  # theirs cancels first
        (SaidSince(theirs=1, bots=0), shanghai(3), False, V.THEY_SPOKE),
        (SaidSince(theirs=0, bots=1), NOON, False, V.BOT_SPOKE),
        (SaidSince(theirs=0, bots=1), shanghai(3), False, V.BOT_SPOKE),
        (NOTHING, shanghai(2), False, V.ASLEEP),
        (NOTHING, shanghai(3, 30), False, V.ASLEEP),
        (NOTHING, shanghai(7, 59), False, V.ASLEEP),
        (NOTHING, shanghai(3, 30), True, V.GO),  # asked to follow up at night too
        (NOTHING, shanghai(1, 59), False, V.GO),  # still up, scrolling
        (NOTHING, shanghai(8), False, V.GO),  # awake again
        (NOTHING, NOON, False, V.GO),
        (NOTHING, NOON, True, V.GO),
    ],
    ids=[
        "they spoke",
        "they spoke and so did the bot",
        "they spoke at night",
        "the bot spoke",
        "the bot spoke at night",
        "02:00 asleep",
        "03:30 asleep",
        "07:59 asleep",
        "03:30 at_night",
        "01:59 awake",
        "08:00 awake",
        "noon",
        "noon at_night",
    ],
)
def test_whether_the_chance_is_still_there(
    said: SaidSince, now: datetime, at_night: bool, verdict: FollowUpVerdict
) -> None:
    assert judge_follow_up(said, now, at_night) is verdict


def test_the_sleeping_hours_are_read_in_shanghai_whatever_the_clock_s_zone() -> None:
    new_york = ZoneInfo("America/New_York")
    asleep = shanghai(4).astimezone(new_york)  # 15:00 the day before in New York
    assert asleep.hour == 15
    assert judge_follow_up(NOTHING, asleep) is V.ASLEEP
    awake = NOON.astimezone(new_york)  # 23:00 in New York, noon in Shanghai
    assert awake.hour == 23
    assert judge_follow_up(NOTHING, awake) is V.GO


def test_the_config_defaults_are_a_twenty_to_sixty_minute_window_by_day() -> None:
    config = FollowUpConfig()
    assert (config.enabled, config.min_minutes, config.max_minutes, config.at_night) == (
        True,
        20.0,
        60.0,
        False,
    )


def test_a_maximum_below_the_minimum_is_refused() -> None:
    with pytest.raises(ValidationError, match="max_minutes"):
        FollowUpConfig(min_minutes=30, max_minutes=10)
    assert FollowUpConfig(min_minutes=30, max_minutes=30).max_minutes == 30


@pytest.mark.parametrize(
    "fields",
    [{"min_minutes": 0}, {"max_minutes": -1}, {"max_minutes": 7 * 24 * 60 + 1}, {"unknown": 1}],
)
def test_out_of_range_or_unknown_knobs_are_refused(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        FollowUpConfig(**fields)  # type: ignore[arg-type]
