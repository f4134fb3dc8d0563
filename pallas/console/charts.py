"""Charts as inline SVG made on the server (pure): no script, no build step, and they read
on a phone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pallas.console.overview import HourCount

WIDTH, HEIGHT, GAP = 480, 120, 2


@dataclass(frozen=True)
class Bar:
    x: float
    width: float
    heard_height: float
    said_height: float
    label: str


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
