"""Favorability: how the bot feels about a person in the long run (pure rules).

A score in [-100, 100] per bot account and person, starting at 0. It grows slowly with
friendly days (a day the person talked with the bot and got an answer: +2, once a day) and
falls by rule with attacks (an insult -8, a put-down -3). It is shown to the model as a tier;
low tiers make silence the easier choice. It never raises rage, and rage never moves it
beyond the attack's own rule (docs/persona.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

MIN_SCORE, MAX_SCORE = -100.0, 100.0
FRIENDLY_DAY = 2.0


class Tier(StrEnum):
    HOSTILE = "反感"
    COLD = "冷淡"
    NEUTRAL = "普通"
    FAMILIAR = "熟络"
    CLOSE = "亲近"


# (lowest score of the tier, tier), highest first.
_TIERS = ((60.0, Tier.CLOSE), (20.0, Tier.FAMILIAR), (-10.0, Tier.NEUTRAL), (-40.0, Tier.COLD))
LOW_TIERS = frozenset({Tier.HOSTILE, Tier.COLD})

# How each tier reads in the prompt: data about the bot's own feelings, not an instruction.
TIER_HINTS = {
    Tier.HOSTILE: "你不太想搭理TA，没必要的话可以不接",
    Tier.COLD: "你对TA有点冷淡，不想接话时可以不理",
    Tier.NEUTRAL: "普通群友",
    Tier.FAMILIAR: "挺熟的，说话可以随意些",
    Tier.CLOSE: "关系很好，TA开的玩笑不必当真",
}


def tier_of(score: float) -> Tier:
    return next((tier for floor, tier in _TIERS if score >= floor), Tier.HOSTILE)


def clamp(score: float) -> float:
    return max(MIN_SCORE, min(MAX_SCORE, score))


@dataclass(frozen=True)
class Warming:
    score: float
    warmed_on: str


def warm(score: float, warmed_on: str, today: str) -> Warming:
    """A friendly exchange: +FRIENDLY_DAY, at most once per day (`today` as YYYY-MM-DD)."""
    if warmed_on == today:
        return Warming(score, warmed_on)
    return Warming(clamp(score + FRIENDLY_DAY), today)


def cooled(score: float, loss: float) -> float:
    """An attack's loss (positive), never below the floor."""
    return clamp(score - max(0.0, loss))
