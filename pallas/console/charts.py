"""Charts as inline SVG made on the server (pure): no script, no build step, and they read
on a phone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pallas.console.overview import HourCount

WIDTH, HEIGHT, GAP = 480, 120, 2


@dataclass(frozen=True)
class Bar:
    x: float
    width: float
    heard_height: float
    said_height: float
    label: str


@dataclass(frozen=True)
class Tick:
    x: float  # the middle of the bar it names
    label: str


def hour_top(hours: Sequence[HourCount]) -> int:
    """The y axis's top: the busiest hour's messages (0 when there were none)."""
    return max((h.heard + h.said for h in hours), default=0)


def hour_ticks(hours: Sequence[HourCount], every: int = 6) -> list[Tick]:
    """The x axis: an hour label every `every` bars, local time."""
    width = WIDTH / max(1, len(hours))
    return [
        Tick(index * width + width / 2, f"{hour.start.astimezone():%H}:00")
        for index, hour in enumerate(hours)
        if index % every == 0
    ]


def hour_bars(hours: Sequence[HourCount]) -> list[Bar]:
    """One pair of stacked bars per hour, scaled to the busiest hour (pure)."""
    top = max((h.heard + h.said for h in hours), default=0) or 1
    width = WIDTH / max(1, len(hours))
    bars = []
    for index, hour in enumerate(hours):
        heard = HEIGHT * hour.heard / top
        said = HEIGHT * hour.said / top
        label = f"{hour.start.astimezone():%H}时 听到{hour.heard} 说了{hour.said}"
        bars.append(Bar(index * width, width - GAP, heard, said, label))
    return bars


@dataclass(frozen=True)
class DayCost:
    day: str  # YYYY-MM-DD, local
    calls: int
    cost: float


def by_day(rows: Sequence[tuple[datetime, float]], now: datetime, days: int) -> list[DayCost]:
    """The last `days` local days, oldest first, with their calls and cost (pure)."""
    today = now.astimezone().date()
    order = [(today - timedelta(days=d)).isoformat() for d in range(days - 1, -1, -1)]
    calls, cost = dict.fromkeys(order, 0), dict.fromkeys(order, 0.0)
    for time, spent in rows:
        key = time.astimezone().date().isoformat()
        if key in calls:
            calls[key] += 1
            cost[key] += spent
    return [DayCost(day, calls[day], round(cost[day], 6)) for day in order]


@dataclass(frozen=True)
class DayBar:
    x: float
    width: float
    height: float
    label: str


def day_top(days: Sequence[DayCost]) -> tuple[str, str]:
    """The day chart's y axis: its top value and unit (cost, or calls when nothing cost)."""
    if any(d.cost for d in days):
        return f"{max(d.cost for d in days):.4f}", "花费/天"
    return str(max((d.calls for d in days), default=0)), "次调用/天"


def day_bars(days: Sequence[DayCost]) -> list[DayBar]:
    """One bar per day, scaled to the dearest day (by calls when nothing cost anything)."""
    use_cost = any(d.cost for d in days)
    top = max((d.cost if use_cost else d.calls for d in days), default=0) or 1
    width = WIDTH / max(1, len(days))
    return [
        DayBar(i * width, width - GAP, HEIGHT * (d.cost if use_cost else d.calls) / top,
               f"{d.day} 调用{d.calls} 花费{d.cost:.4f}")
        for i, d in enumerate(days)
    ]  # fmt: skip
