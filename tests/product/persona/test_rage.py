"""Rage as pure rules: pressure that halves with time, a silence when it crosses the threshold,
the blacklist for a second silence within the window, and the config's minutes and hours."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pallas.product.persona.config import RageConfig
from pallas.product.persona.rage import (
    DEFAULT_RAGE,
    RageOutcome,
    RagePolicy,
    RageReading,
    RageStep,
    decayed,
    step_rage,
)

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
INSULT = 4.0  # what an insult adds (attacks.py)


def test_pressure_halves_every_half_life() -> None:
    reading = RageReading(8.0, T0)
    half = DEFAULT_RAGE.half_life
    assert decayed(reading, T0) == 8.0
    assert decayed(reading, T0 + half) == pytest.approx(4.0)
    assert decayed(reading, T0 + 2 * half) == pytest.approx(2.0)
    assert decayed(reading, T0 + half / 2) == pytest.approx(8.0 * 0.5**0.5)


def test_a_slower_policy_decays_more_slowly() -> None:
    policy = RagePolicy(half_life=timedelta(hours=1))
    assert decayed(RageReading(6.0, T0), T0 + timedelta(hours=1), policy) == pytest.approx(3.0)


def test_pressure_is_never_negative_and_fades_to_nearly_nothing() -> None:
    left = decayed(RageReading(8.0, T0), T0 + timedelta(days=30))
    assert 0.0 <= left < 1e-6
    assert decayed(RageReading(0.0, T0), T0 + timedelta(hours=1)) == 0.0


def test_pressure_does_not_grow_when_time_runs_backwards() -> None:
    reading = RageReading(5.0, T0)
    assert decayed(reading, T0 - timedelta(hours=3)) == 5.0


def test_no_attack_changes_nothing_but_reports_the_decayed_pressure() -> None:
    reading = RageReading(6.0, T0)
    now = T0 + DEFAULT_RAGE.half_life
    step = step_rage(reading, 0.0, [], now)
    assert step.outcome is RageOutcome.NONE
    assert step.pressure == pytest.approx(3.0)
    assert step.silenced_until is None
    assert step_rage(None, 0.0, [], now) == RageStep(RageOutcome.NONE, 0.0, None)


def test_a_negative_weight_is_no_attack() -> None:
    step = step_rage(RageReading(6.0, T0), -4.0, [], T0)
    assert (step.outcome, step.pressure) == (RageOutcome.NONE, 6.0)


def test_an_attack_under_the_threshold_makes_the_bot_angrier() -> None:
    step = step_rage(None, INSULT, [], T0)
    assert step == RageStep(RageOutcome.ANGRIER, INSULT, None)
    # Just under the threshold is still only angrier.
    step = step_rage(RageReading(3.99, T0), INSULT, [], T0)
    assert step.outcome is RageOutcome.ANGRIER
    assert step.pressure == pytest.approx(7.99)


def test_crossing_the_threshold_silences_and_empties_the_pressure() -> None:
    step = step_rage(RageReading(INSULT, T0), INSULT, [], T0)
    assert step == RageStep(RageOutcome.SILENCED, 0.0, T0 + DEFAULT_RAGE.silence)


def test_a_second_silence_within_the_window_blacklists() -> None:
    earlier = [T0 - timedelta(hours=23)]
    step = step_rage(RageReading(INSULT, T0), INSULT, earlier, T0)
    assert step.outcome is RageOutcome.BLACKLISTED
    assert step.pressure == 0.0
    assert step.silenced_until == T0 + DEFAULT_RAGE.silence


def test_a_silence_exactly_at_the_window_edge_still_counts() -> None:
    earlier = [T0 - DEFAULT_RAGE.escalate_within]
    step = step_rage(RageReading(INSULT, T0), INSULT, earlier, T0)
    assert step.outcome is RageOutcome.BLACKLISTED


def test_an_earlier_silence_older_than_the_window_only_silences() -> None:
    earlier = [T0 - DEFAULT_RAGE.escalate_within - timedelta(seconds=1)]
    step = step_rage(RageReading(INSULT, T0), INSULT, earlier, T0)
    assert step.outcome is RageOutcome.SILENCED
    assert step.silenced_until == T0 + DEFAULT_RAGE.silence


def test_more_silences_may_be_needed_by_policy() -> None:
    policy = RagePolicy(silences_to_blacklist=3)
    one = [T0 - timedelta(hours=2)]
    two = [T0 - timedelta(hours=2), T0 - timedelta(hours=1)]
    assert step_rage(None, 8.0, one, T0, policy).outcome is RageOutcome.SILENCED
    assert step_rage(None, 8.0, two, T0, policy).outcome is RageOutcome.BLACKLISTED


def test_decay_between_attacks_can_keep_someone_under_the_threshold() -> None:
    """Two insults two hours apart never reach 8: the first has all but faded."""
    first = step_rage(None, INSULT, [], T0)
    assert first.outcome is RageOutcome.ANGRIER
    later = T0 + timedelta(hours=2)
    second = step_rage(RageReading(first.pressure, T0), INSULT, [], later)
    assert second.outcome is RageOutcome.ANGRIER
    assert second.pressure == pytest.approx(INSULT + INSULT * 0.5**6)  # 6 half-lives later


def test_two_quick_insults_cross_but_spread_out_ones_do_not() -> None:
    now, reading = T0, None
    outcomes = []
    for _ in range(12):  # an insult every hour for half a day
        step = step_rage(reading, INSULT, [], now)
        outcomes.append(step.outcome)
        reading = RageReading(step.pressure, now)
        now += timedelta(hours=1)
    assert set(outcomes) == {RageOutcome.ANGRIER}


def test_the_config_maps_minutes_and_hours_to_the_policy() -> None:
    config = RageConfig(
        threshold=12,
        half_life_minutes=45,
        silence_minutes=90,
        escalate_within_hours=6,
    )
    assert config.policy() == RagePolicy(
        threshold=12.0,
        half_life=timedelta(minutes=45),
        silence=timedelta(minutes=90),
        escalate_within=timedelta(hours=6),
    )
    assert RageConfig().policy() == DEFAULT_RAGE
