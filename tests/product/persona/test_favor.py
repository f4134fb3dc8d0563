"""Favorability as pure rules: its tiers, its bounds, a friendly day once a day, attacks'
losses never below the floor."""

from __future__ import annotations

import pytest

from pallas.product.persona.favor import (
    FRIENDLY_DAY,
    LOW_TIERS,
    MAX_SCORE,
    MIN_SCORE,
    TIER_HINTS,
    Tier,
    Warming,
    clamp,
    cooled,
    tier_of,
    warm,
)


@pytest.mark.parametrize(
    ("score", "tier"),
    [
        (100.0, Tier.CLOSE),
        (60.0, Tier.CLOSE),
        (59.99, Tier.FAMILIAR),
        (20.0, Tier.FAMILIAR),
        (19.99, Tier.NEUTRAL),
        (0.0, Tier.NEUTRAL),
        (-10.0, Tier.NEUTRAL),
        (-10.01, Tier.COLD),
        (-40.0, Tier.COLD),
        (-40.01, Tier.HOSTILE),
        (-100.0, Tier.HOSTILE),
    ],
)
def test_each_tier_starts_at_its_floor(score: float, tier: Tier) -> None:
    assert tier_of(score) is tier


def test_every_tier_has_a_hint_and_the_low_ones_are_hostile_and_cold() -> None:
    assert set(TIER_HINTS) == set(Tier)
    assert frozenset({Tier.HOSTILE, Tier.COLD}) == LOW_TIERS


@pytest.mark.parametrize(
    ("score", "clamped"),
    [(-250.0, MIN_SCORE), (-100.0, -100.0), (0.0, 0.0), (100.0, 100.0), (101.0, MAX_SCORE)],
)
def test_clamp_keeps_the_score_within_its_bounds(score: float, clamped: float) -> None:
    assert clamp(score) == clamped


def test_a_friendly_day_warms_once_per_day() -> None:
    first = warm(10.0, "", "2026-12-01")
    assert first == Warming(10.0 + FRIENDLY_DAY, "2026-12-01")
    same_day = warm(first.score, first.warmed_on, "2026-12-01")
    assert same_day == first  # the same day: no change
    next_day = warm(same_day.score, same_day.warmed_on, "2026-12-02")
    assert next_day == Warming(14.0, "2026-12-02")


def test_warming_is_capped_at_the_top() -> None:
    assert warm(99.0, "2026-12-01", "2026-12-02") == Warming(100.0, "2026-12-02")
    assert warm(100.0, "2026-12-01", "2026-12-02") == Warming(100.0, "2026-12-02")


def test_cooling_never_goes_below_the_floor() -> None:
    assert cooled(0.0, 8.0) == -8.0
    assert cooled(-95.0, 8.0) == -100.0
    assert cooled(-100.0, 3.0) == -100.0


def test_a_negative_loss_is_ignored() -> None:
    assert cooled(10.0, -8.0) == 10.0
    assert cooled(100.0, -1.0) == 100.0
