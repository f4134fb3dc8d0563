"""One account across all its chats (pure): the send windows, the same text held back from
other groups, new groups warmed up, and the rate a queued backlog really leaves at."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import replace

import pytest

from pallas.product.conversation.delivery.account_pace import AccountPace, Outgoing, text_key
from pallas.product.conversation.delivery.pacing import DeliveryPolicy, RateGate

BOT = "10001"


def pace(**changes: object) -> AccountPace:
    policy = replace(DeliveryPolicy(), **changes)
    return AccountPace(lambda: policy)


def busiest(times: list[float], length: float) -> int:
    """The most sends in any window of `length` seconds (ascending times)."""
    ordered = sorted(times)
    return max(
        (bisect_left(ordered, at + length) - i for i, at in enumerate(ordered)), default=0
    )


def drain(gate: RateGate, queues: dict[int, list[Outgoing]], start: float) -> list[float]:
    """The dispatcher's loop over the heads, with time passed in: each look sends every head
    that may go now, then the clock moves to the soonest wait. The send times."""
    now, times = start, []
    while any(queues.values()):
        soonest = float("inf")
        for stream, queue in queues.items():
            if not queue:
                continue
            wait = gate.wait(stream, 0.0, now, queue[0])
            if wait > 0:
                soonest = min(soonest, wait)
                continue
            gate.sent(stream, now, queue.pop(0))
            times.append(now)
            soonest = 0.0
        now += soonest if soonest > 0 else 0.0
    return times


def test_300_replies_across_30_groups_leave_no_faster_than_the_documented_rate() -> None:
    policy = DeliveryPolicy()  # the documented defaults: 20 a minute, 300 an hour
    gate = RateGate(lambda: policy)
    queues = {
        group: [Outgoing(BOT, group, f"第{group}群第{n}条", new_group=True) for n in range(10)]
        for group in range(30)
    }
    times = drain(gate, queues, start=1000.0)
    assert len(times) == 300
    assert busiest(times, 60.0) == 20  # bursts up to the minute's budget, never beyond
    assert busiest(times, 3600.0) == 300
    # 300 at 20 a minute: the last leaves 14 minutes after the first, not sooner.
    assert max(times) - min(times) >= 14 * 60
    # Without the account limits the global bucket alone would have sent them in ~150 s.
    unlimited = replace(policy, account_per_minute=0, account_per_hour=0, new_group_per_hour=0)
    fast = RateGate(lambda: unlimited)
    queues = {group: [Outgoing(BOT, group) for _ in range(10)] for group in range(30)}
    fast_times = drain(fast, queues, start=1000.0)
    assert max(fast_times) - min(fast_times) < 160


def test_the_hour_window_holds_when_the_minute_window_would_not() -> None:
    account = pace(account_per_minute=0, account_per_hour=3)
    for n in range(3):
        assert account.wait(Outgoing(BOT, n), 100.0 + n) == 0
        account.sent(Outgoing(BOT, n), 100.0 + n)
    assert account.wait(Outgoing(BOT, 9), 200.0) == pytest.approx(3500.0)  # the first's hour
    assert account.wait(Outgoing(BOT, 9), 3700.0) == 0
    assert account.wait(Outgoing("20002", 9), 200.0) == 0  # another account has its own


def test_the_same_text_to_another_group_waits_its_hold_the_same_group_does_not() -> None:
    account = pace(same_text_hold_s=600.0)
    notice = Outgoing(BOT, 1, text_key("本群今晚八点停机维护，请大家提前保存", DeliveryPolicy()))
    account.sent(notice, 100.0)
    elsewhere = replace(notice, stream_id=2)
    assert account.wait(elsewhere, 160.0) == pytest.approx(540.0)
    assert account.wait(replace(notice), 160.0) == 0  # the same chat: its own pacing
    assert account.wait(elsewhere, 700.0) == 0
    assert account.wait(replace(elsewhere, text_key="另一段完全不同的通知内容"), 160.0) == 0
    account.sent(elsewhere, 700.0)
    assert account.wait(replace(notice), 710.0) == 0  # the first chat again, after the second
    assert account.wait(replace(notice, stream_id=3), 710.0) == pytest.approx(590.0)


@pytest.mark.parametrize(
    ("text", "compared"),
    [("哈哈哈", False), ("  好 的 ", False), ("今晚八点停机维护请知悉", True)],
)
def test_short_texts_are_not_compared_across_groups(text: str, compared: bool) -> None:
    assert bool(text_key(text, DeliveryPolicy())) is compared


def test_a_new_group_is_warmed_up_an_old_one_is_not() -> None:
    account = pace(new_group_per_hour=2, account_per_minute=0)
    for n in range(2):
        account.sent(Outgoing(BOT, 5, new_group=True), 10.0 + n)
    assert account.wait(Outgoing(BOT, 5, new_group=True), 20.0) == pytest.approx(3590.0)
    assert account.wait(Outgoing(BOT, 6, new_group=True), 20.0) == 0  # its own hour
    assert account.wait(Outgoing(BOT, 7), 20.0) == 0


def test_zero_turns_a_window_off() -> None:
    account = pace(account_per_minute=0, account_per_hour=0, new_group_per_hour=0)
    for n in range(500):
        send = Outgoing(BOT, n % 3, new_group=True)
        assert account.wait(send, 1.0) == 0
        account.sent(send, 1.0)
