from __future__ import annotations

from random import Random

from pallas.providers.catalog import BreakerPolicy, Pricing
from pallas.providers.selection import CircuitBreaker, order_candidates

NAMES = ["a", "b", "c", "d"]


def test_preferred_model_comes_first_then_the_rest() -> None:
    order = order_candidates(NAMES, preferred="c", deterministic=False, rng=Random(1))
    assert order[0] == "c"
    assert sorted(order) == NAMES


def test_deterministic_types_keep_registration_order() -> None:
    assert order_candidates(NAMES, preferred=None, deterministic=True, rng=Random(1)) == NAMES
    assert order_candidates(NAMES, preferred="c", deterministic=True, rng=Random(1)) == [
        "c",
        "a",
        "b",
        "d",
    ]


def test_other_types_spread_load_over_every_model() -> None:
    rng = Random(7)
    firsts = {
        order_candidates(NAMES, preferred=None, deterministic=False, rng=rng)[0] for _ in range(200)
    }
    assert firsts == set(NAMES)


def test_unknown_preferred_name_is_ignored() -> None:
    order = order_candidates(NAMES, preferred="zz", deterministic=True, rng=Random(1))
    assert order == NAMES


def test_breaker_opens_after_consecutive_failures_and_closes_after_cooldown() -> None:
    breaker = CircuitBreaker(BreakerPolicy(failures_to_open=3, cooldown_s=30))
    breaker.failed("a", now=0)
    breaker.failed("a", now=1)
    assert not breaker.is_open("a", now=2)
    breaker.failed("a", now=2)
    assert breaker.is_open("a", now=2)
    assert breaker.reopens_in("a", now=12) == 20
    assert not breaker.is_open("a", now=32.1)


def test_a_success_resets_the_count() -> None:
    breaker = CircuitBreaker(BreakerPolicy(failures_to_open=2, cooldown_s=30))
    breaker.failed("a", now=0)
    breaker.succeeded("a")
    breaker.failed("a", now=1)
    assert not breaker.is_open("a", now=1)


def test_retry_after_rests_the_model_exactly_that_long_bounded() -> None:
    breaker = CircuitBreaker(BreakerPolicy(failures_to_open=5, max_retry_after_s=60))
    breaker.failed("a", now=100, retry_after_s=7)
    assert breaker.is_open("a", now=106.9)
    assert not breaker.is_open("a", now=107)
    breaker.failed("b", now=0, retry_after_s=86_400)
    assert breaker.reopens_in("b", now=0) == 60


def test_cost_charges_cache_hits_as_part_of_the_input() -> None:
    pricing = Pricing(input=2.0, output=8.0, cache_hit=0.5)
    # 400 uncached * 2 + 800 cached * 0.5 + 300 out * 8, per million
    assert pricing.cost(1200, 300, 800) == (400 * 2 + 800 * 0.5 + 300 * 8) / 1_000_000


def test_cache_hits_beyond_the_input_are_capped() -> None:
    pricing = Pricing(input=2.0, output=8.0, cache_hit=0.5)
    assert pricing.cost(100, 0, 500) == 100 * 0.5 / 1_000_000


def test_missing_cache_price_charges_the_input_price() -> None:
    assert Pricing(input=2.0, output=1.0).cost(1000, 0, 600) == 1000 * 2 / 1_000_000
    assert Pricing().cost(10**6, 10**6, 0) == 0.0
