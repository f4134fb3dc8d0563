"""Delivery decisions (pure): pauses, the rate gate, retries, recovery, staleness."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from pallas.product.conversation.delivery.pacing import (
    DeliveryPolicy,
    RateGate,
    Recovery,
    bubble_pauses,
    is_stale,
    recover_interrupted,
    retry_delay,
)

POLICY = DeliveryPolicy(
    chars_per_second=10,
    min_pause_s=1,
    max_pause_s=3,
    stream_interval_s=2,
    global_per_second=1,
    global_burst=3,
)
T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_the_first_bubble_goes_at_once_the_others_after_their_typing_time() -> None:
    assert bubble_pauses(["嗯", "你说的那个地方我去过", "x" * 100], POLICY) == [0.0, 1.0, 3.0]
    assert bubble_pauses(["a" * 15, "b" * 15], POLICY) == [0.0, 1.5]
    assert bubble_pauses([], POLICY) == []


@pytest.mark.parametrize(("attempts", "delay"), [(1, 2.0), (2, 4.0), (3, 8.0), (10, 60.0)])
def test_backoff_doubles_up_to_a_cap(attempts: int, delay: float) -> None:
    assert retry_delay(attempts, DeliveryPolicy()) == delay


def test_one_conversation_is_spaced_by_its_interval_and_the_pause() -> None:
    gate = RateGate(lambda: POLICY)
    assert gate.wait(1, 0.0, now=100.0) == 0
    gate.sent(1, now=100.0)
    assert gate.wait(1, 0.0, now=100.5) == pytest.approx(1.5)  # the stream interval
    assert gate.wait(1, 3.0, now=100.5) == pytest.approx(2.5)  # a longer typing pause
    assert gate.wait(2, 0.0, now=100.5) == 0  # other conversations are not held back


def test_the_global_bucket_drains_a_backlog_slowly() -> None:
    gate = RateGate(lambda: POLICY)
    now = 0.0
    for stream in range(3):  # the burst
        assert gate.wait(stream, 0, now) == 0
        gate.sent(stream, now)
    assert gate.wait(9, 0, now) == pytest.approx(1.0)  # then one per second
    assert gate.wait(9, 0, now + 1.0) == 0


def test_the_global_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    policy = replace(POLICY, global_per_second=4, global_burst=2, stream_interval_s=0)
    gate = RateGate(lambda: policy)
    start = 100.0  # the clock is a monotonic reading: it does not start at 0
    for stream in range(2):
        gate.sent(stream, start)
    assert gate.wait(9, 0, start) == pytest.approx(0.25)  # one token at 4 a second
    assert gate.wait(9, 0, start + 0.125) == pytest.approx(0.125)  # half a token back
    assert gate.wait(9, 0, start + 0.25) == 0
    gate.sent(9, start + 60)  # a long quiet spell refills only up to the burst
    gate.sent(8, start + 60)
    assert gate.wait(7, 0, start + 60) == pytest.approx(0.25)


@pytest.mark.parametrize(
    ("age_s", "echoed", "in_history", "expected"),
    [
        (5, True, None, Recovery.CONFIRMED),
        (500, True, None, Recovery.CONFIRMED),
        (5, False, True, Recovery.CONFIRMED),
        (500, False, True, Recovery.CONFIRMED),
        (5, False, False, Recovery.RESEND),
        (500, False, False, Recovery.RESEND),  # the platform says it never went out
        (600, False, False, Recovery.RESEND),  # stale only past the bound
        (601, False, False, Recovery.UNKNOWN),  # stale: out of context by now
        (5, False, None, Recovery.RESEND),  # history unreadable: the old bound decides
        (30, False, None, Recovery.RESEND),
        (31, False, None, Recovery.UNKNOWN),
    ],
)
def test_an_interrupted_send(
    age_s: float, echoed: bool, in_history: bool | None, expected: Recovery
) -> None:
    created = T - timedelta(seconds=age_s)
    policy = DeliveryPolicy()
    assert recover_interrupted(created, T, policy, echoed=echoed, in_history=in_history) is expected


def test_staleness() -> None:
    assert not is_stale(T - timedelta(minutes=9), T, DeliveryPolicy())
    assert not is_stale(T - timedelta(minutes=10), T, DeliveryPolicy())  # the bound itself
    assert is_stale(T - timedelta(minutes=11), T, DeliveryPolicy())
