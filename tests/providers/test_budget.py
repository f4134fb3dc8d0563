"""The daily budget: reservations hold worst cases, spending stops at the cap with at most
one call's overshoot, a new day starts from what the store says, the owners are told once."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta

import pytest

from pallas.providers.budget import (
    BudgetLimits,
    BudgetReachedError,
    DailyBudget,
    Shares,
    Spend,
    day_of,
    reached,
    start_of,
)

# 15:30 UTC is 23:30 in China: half an hour before the bot's midnight.
LATE = datetime(2026, 12, 5, 15, 30, tzinfo=UTC)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.mark.parametrize(
    ("limits", "committed", "stops"),
    [
        (BudgetLimits(cost=0.02), Spend(0.0199, 10), False),
        (BudgetLimits(cost=0.02), Spend(0.02, 10), True),
        (BudgetLimits(tokens=1000), Spend(5.0, 999), False),
        (BudgetLimits(tokens=1000), Spend(0.0, 1000), True),
        (BudgetLimits(cost=1.0, tokens=1000), Spend(0.5, 1200), True),  # either cap
        (BudgetLimits(cost=0.0), Spend(), True),  # a budget of 0: nothing at all
        (BudgetLimits(), Spend(99.0, 10**9), False),  # no cap
    ],
)
def test_reached(limits: BudgetLimits, committed: Spend, stops: bool) -> None:
    assert reached(limits, committed) is stops


def test_the_bots_day_is_chinas() -> None:
    assert day_of(LATE) == date(2026, 12, 5)
    assert day_of(LATE + timedelta(minutes=31)) == date(2026, 12, 6)
    assert start_of(date(2026, 12, 6)) == datetime(2026, 12, 5, 16, 0, tzinfo=UTC)


async def test_calls_stop_at_the_cap_with_one_calls_overshoot_at_most() -> None:
    told: list[tuple[date, int | None]] = []

    async def tell(day: date, stream: int | None) -> None:
        told.append((day, stream))

    budget = DailyBudget(BudgetLimits(cost=0.02), Clock(LATE), on_reached=tell)
    made = 0
    for _ in range(30):
        try:
            held = await budget.reserve(Spend(0.01, 100), stream_id=7)
        except BudgetReachedError:
            continue
        budget.settle(held, Spend(0.015, 80))  # less than its worst case, but still 0.015
        made += 1
    _, spent = await budget.today()
    assert made == 2 and spent.cost == pytest.approx(0.03)  # 0.02 + less than one call
    await asyncio.sleep(0)  # the owners are told from a task of its own
    assert told == [(date(2026, 12, 5), 7)]  # once, however many are refused


async def test_concurrent_calls_see_each_others_reservations() -> None:
    budget = DailyBudget(BudgetLimits(cost=0.05), Clock(LATE))
    gate = asyncio.Event()
    started = 0

    async def call() -> None:
        nonlocal started
        held = await budget.reserve(Spend(0.02, 100))
        started += 1
        await gate.wait()
        budget.settle(held, Spend(0.02, 100))

    tasks = [asyncio.create_task(call()) for _ in range(100)]  # a burst: room for 3
    await asyncio.sleep(0.01)
    gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    refused = [r for r in results if isinstance(r, BudgetReachedError)]
    assert started == 3 and len(refused) == 97  # 0, 0.02, 0.04 were below 0.05
    _, spent = await budget.today()
    assert spent.cost == pytest.approx(0.06)  # over by less than one call's worst case


async def test_a_failed_call_is_released_and_costs_nothing() -> None:
    budget = DailyBudget(BudgetLimits(cost=0.02), Clock(LATE))
    held = await budget.reserve(Spend(0.03, 100))
    budget.release(held)
    await budget.reserve(Spend(0.01, 100))  # the released worst case holds nothing


async def test_a_new_day_starts_from_what_the_store_says_and_midnight_keeps_its_calls() -> None:
    clock = Clock(LATE)
    seen: list[datetime] = []

    async def seed(since: datetime) -> Spend:
        seen.append(since)
        return Spend(0.019, 0) if since == start_of(date(2026, 12, 5)) else Spend()

    budget = DailyBudget(BudgetLimits(cost=0.02), clock, seed)
    held = await budget.reserve(Spend(0.01, 10))  # spent before a restart: 0.019, below
    with pytest.raises(BudgetReachedError):
        await budget.reserve(Spend(0.01, 10))  # 0.019 + 0.01 held
    clock.now = LATE + timedelta(hours=1)  # past the bot's midnight, the call still running
    budget.settle(held, Spend(0.01, 10))  # counted in its own day, not the new one
    assert await budget.today() == (date(2026, 12, 6), Spend())
    assert seen == [start_of(date(2026, 12, 5)), start_of(date(2026, 12, 6))]


async def test_work_nobody_waits_for_stops_first_and_is_no_news() -> None:
    told: list[date] = []

    async def tell(day: date, _stream: int | None) -> None:
        told.append(day)

    budget = DailyBudget(BudgetLimits(cost=0.10), Clock(LATE), on_reached=tell)
    budget.settle(await budget.reserve(Spend(0.01, 10)), Spend(0.085, 10))  # past 80 %
    with pytest.raises(BudgetReachedError):
        await budget.reserve(Spend(0.01, 10), ambient=True)  # extraction: stops at 80 %
    await budget.reserve(Spend(0.01, 10))  # an answer still may
    await asyncio.sleep(0)
    assert told == []  # the cap itself is not reached: nobody is told
    assert reached(BudgetLimits(tokens=1000), Spend(0, 800), 0.8)
    assert not reached(BudgetLimits(tokens=1000), Spend(0, 799), 0.8)


async def test_a_store_that_cannot_say_todays_spend_counts_from_nothing() -> None:
    async def broken(_since: datetime) -> Spend:
        raise OSError("disk gone")

    budget = DailyBudget(BudgetLimits(cost=0.02), Clock(LATE), broken)
    assert await budget.reserve(Spend(0.01, 10)) == 0  # the call goes; the error is logged


async def test_an_owners_cap_for_today_holds_across_a_restart_and_not_tomorrow() -> None:
    kept: dict[date, BudgetLimits] = {}

    async def load(day: date) -> BudgetLimits | None:
        return kept.get(day)

    async def save(day: date, limits: BudgetLimits) -> None:
        kept[day] = limits

    clock = Clock(LATE)
    budget = DailyBudget(BudgetLimits(cost=0.02), clock, load_raised=load, save_raised=save)
    budget.settle(await budget.reserve(Spend(0.01, 10)), Spend(0.03, 10))
    with pytest.raises(BudgetReachedError):
        await budget.reserve(Spend(0.01, 10))
    await budget.set_today(BudgetLimits(cost=0.10))
    await budget.reserve(Spend(0.01, 10))  # calls start again at once
    restarted = DailyBudget(BudgetLimits(cost=0.02), clock, load_raised=load)
    assert (await restarted.today())[0] == date(2026, 12, 5)
    assert restarted.today_limits == BudgetLimits(cost=0.10)
    clock.now = LATE + timedelta(hours=1)  # the next day: the configured cap again
    await restarted.today()
    assert restarted.today_limits == BudgetLimits(cost=0.02)


async def test_a_purposes_share_and_a_groups_share_stop_only_their_own_calls() -> None:
    told: list[int | None] = []

    async def tell(_day: date, stream: int | None) -> None:
        told.append(stream)

    async def share(stream_id: int) -> float:
        return 0.25 if stream_id == 7 else 1.0

    budget = DailyBudget(BudgetLimits(cost=1.0), Clock(LATE), on_reached=tell)
    budget.shares = lambda: Shares(purposes=((("vision",), 0.1), (("decision", "reply"), 0.5)))
    budget.group_share = share
    budget.settle(await budget.reserve(Spend(0.01, 1), purpose="vision"), Spend(0.1, 1))
    with pytest.raises(BudgetReachedError):
        await budget.reserve(Spend(0.01, 1), purpose="vision")  # its 10 % is spent
    budget.settle(await budget.reserve(Spend(0.01, 1), 7, purpose="decision"), Spend(0.2, 1))
    held = await budget.reserve(Spend(0.05, 1), 7, purpose="decision")  # 0.2 + 0.05 held
    with pytest.raises(BudgetReachedError):
        await budget.reserve(Spend(0.01, 1), 7, purpose="decision")  # group 7's quarter
    budget.release(held)
    await budget.reserve(Spend(0.01, 1), 8, purpose="decision")  # another group goes on
    # A turn's decision and reply share one half: the reply's spend counts for the decision.
    budget.settle(await budget.reserve(Spend(0.01, 1), purpose="reply"), Spend(0.3, 1))
    with pytest.raises(BudgetReachedError):
        await budget.reserve(Spend(0.01, 1), 9, purpose="decision")  # 0.2 + 0.01 + 0.3
    await asyncio.sleep(0)
    assert told == []  # the day's cap is far: nobody is told of a share


async def test_a_restart_reads_the_shares_spent_back() -> None:
    async def parts(_since: datetime) -> dict[str, Spend]:
        return {"purpose:extraction": Spend(0.3, 10), "stream:3": Spend(0.5, 10)}

    async def half(_stream_id: int) -> float:
        return 0.5

    budget = DailyBudget(BudgetLimits(cost=1.0), Clock(LATE), seed_parts=parts)
    budget.shares = lambda: Shares(purposes=((("extraction",), 0.3),))
    budget.group_share = half
    with pytest.raises(BudgetReachedError):
        await budget.reserve(Spend(0.01, 1), purpose="extraction")
    with pytest.raises(BudgetReachedError):
        await budget.reserve(Spend(0.01, 1), 3)
    await budget.reserve(Spend(0.01, 1), 4, purpose="decision")


async def test_the_cheaper_model_answers_first_past_its_share() -> None:
    budget = DailyBudget(BudgetLimits(tokens=1000), Clock(LATE))
    budget.shares = lambda: Shares(cheaper_model="mini", cheaper_from=0.9)
    assert budget.cheaper_model() is None  # no call yet today
    budget.settle(await budget.reserve(Spend(0, 10)), Spend(0, 899))
    assert budget.cheaper_model() is None
    held = await budget.reserve(Spend(0, 1))  # a call in flight counts
    assert budget.cheaper_model() == "mini"
    budget.release(held)
    budget.shares = lambda: Shares(cheaper_from=0.5)  # no cheaper model named
    assert budget.cheaper_model() is None


async def test_spent_out_says_when_no_model_will_be_called_today() -> None:
    clock = Clock(LATE)
    budget = DailyBudget(BudgetLimits(cost=0.02), clock)
    assert not budget.spent_out()  # nothing known of today yet
    budget.settle(await budget.reserve(Spend(0.01, 1)), Spend(0.015, 1))
    assert not budget.spent_out()
    held = await budget.reserve(Spend(0.01, 1))  # 0.015 spent + 0.01 held: at the cap
    assert budget.spent_out()
    budget.release(held)
    assert not budget.spent_out()
    clock.now = LATE + timedelta(hours=1)  # past the bot's midnight: a new day
    assert not budget.spent_out()
