"""The overview's and the models page's counts (pure): hours and days bucketed, scaled."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pallas.console.charts import by_day, day_bars, hour_bars
from pallas.console.overview import by_hour

NOW = datetime(2026, 12, 2, 12, 30, tzinfo=UTC)


def test_messages_fall_into_their_hour_and_old_ones_fall_out() -> None:
    rows = [
        (NOW, False),
        (NOW - timedelta(minutes=20), True),  # same hour (12:10)
        (NOW - timedelta(hours=3), False),
        (NOW - timedelta(hours=30), False),  # older than a day: not shown
    ]
    hours = by_hour(rows, NOW)
    assert len(hours) == 24 and hours[-1].start == NOW.replace(minute=0)
    assert (hours[-1].heard, hours[-1].said) == (1, 1)
    assert hours[-4].heard == 1 and sum(h.heard for h in hours) == 2
    bars = hour_bars(hours)
    assert bars[-1].heard_height == bars[-1].said_height == 60  # half each of the busiest
    assert all(b.heard_height == b.said_height == 0 for b in bars[:-4])


def test_calls_and_cost_fall_into_their_day() -> None:
    rows = [(NOW, 0.5), (NOW - timedelta(hours=1), 0.25), (NOW - timedelta(days=2), 1.0)]
    days = by_day(rows, NOW, 3)
    assert [(d.calls, d.cost) for d in days] == [(1, 1.0), (0, 0.0), (2, 0.75)]
    assert days[-1].day == NOW.astimezone().date().isoformat()
    assert [b.height for b in day_bars(days)] == [120, 0, 90]


def test_free_calls_are_drawn_by_their_count() -> None:
    days = by_day([(NOW, 0.0), (NOW, 0.0)], NOW, 2)
    assert [b.height for b in day_bars(days)] == [0, 120]
