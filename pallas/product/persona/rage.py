"""Rage: short-term pressure from attacks on the bot, per chat and person (pure rules).

  an attack (attacks.py) -> pressure += its weight, after decaying what was there
  -> pressure >= threshold: silenced for `silence` (the silence stage ignores them)
  -> the second silence within 24 hours: the chat's blacklist, and the owners are told

Pressure halves every `half_life`; a silence empties it, so the next one needs new attacks.
Rage never changes favorability's sign of affection nor the bot's style: it is a short
penalty, kept apart (docs/persona.md). Every function takes the time it needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum


@dataclass(frozen=True)
class RagePolicy:
    threshold: float = 8.0
    half_life: timedelta = timedelta(minutes=20)
    silence: timedelta = timedelta(minutes=30)
    escalate_within: timedelta = timedelta(hours=24)
    silences_to_blacklist: int = 2


DEFAULT_RAGE = RagePolicy()


class RageOutcome(StrEnum):
    NONE = "none"  # no attack, or not enough yet
    ANGRIER = "angrier"  # pressure rose, still under the threshold
    SILENCED = "silenced"  # crossed the threshold: silenced for a while
    BLACKLISTED = "blacklisted"  # silenced again within the window: on the blacklist


@dataclass(frozen=True)
class RageReading:
    pressure: float
    at: datetime


@dataclass(frozen=True)
class RageStep:
    outcome: RageOutcome
    pressure: float  # after this step (0 after a silence began)
    silenced_until: datetime | None


def decayed(reading: RageReading, now: datetime, policy: RagePolicy = DEFAULT_RAGE) -> float:
    """The pressure left at `now` (never negative, never grows by itself)."""
    elapsed = max(0.0, (now - reading.at).total_seconds())
    return reading.pressure * 0.5 ** (elapsed / policy.half_life.total_seconds())


def step_rage(
    reading: RageReading | None,
    weight: float,
    earlier_silences: Sequence[datetime],
    now: datetime,
    policy: RagePolicy = DEFAULT_RAGE,
) -> RageStep:
    """One attack of `weight` (0: none) on top of what is left of the earlier ones."""
    left = decayed(reading, now, policy) if reading else 0.0
    pressure = left + max(0.0, weight)
    if weight <= 0:
        return RageStep(RageOutcome.NONE, pressure, None)
    if pressure < policy.threshold:
        return RageStep(RageOutcome.ANGRIER, pressure, None)
    recent = [t for t in earlier_silences if now - t <= policy.escalate_within]
    outcome = (
        RageOutcome.BLACKLISTED
        if len(recent) + 1 >= policy.silences_to_blacklist
        else RageOutcome.SILENCED
    )
    return RageStep(outcome, 0.0, now + policy.silence)
