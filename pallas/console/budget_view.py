"""Today's model spending against the caps, as the console shows and changes it (docs/cost.md):
the same numbers as `/预算`, and the same way to change today's caps."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from pallas.providers.budget import BudgetLimits, DailyBudget


@dataclass(frozen=True)
class BudgetToday:
    day: str
    cost: float
    tokens: int
    cost_cap: float | None  # today's (an owner's for today, else .env's)
    token_cap: int | None
    configured_cost: float | None  # .env's, which tomorrow returns to
    configured_tokens: int | None


class CapsRefused(ValueError):
    """What the owner asked for cannot be a cap; the message says why (Chinese)."""


async def budget_today(budget: DailyBudget) -> BudgetToday:
    day, spent = await budget.today()
    today, configured = budget.today_limits, budget.limits
    return BudgetToday(
        day.isoformat(), spent.cost, spent.tokens, today.cost, today.tokens,
        configured.cost, configured.tokens,
    )  # fmt: skip


def caps_asked(current: BudgetLimits, cost: str | None, tokens: str | None) -> BudgetLimits:
    """Today's caps from a form or a request: an empty value keeps that cap as it is."""
    wanted = current
    try:
        if cost not in (None, ""):
            wanted = replace(wanted, cost=float(str(cost)))
        if tokens not in (None, ""):
            wanted = replace(wanted, tokens=int(str(tokens)))
    except ValueError:
        raise CapsRefused("上限要填数字") from None
    if wanted.cost is not None and not math.isfinite(wanted.cost):
        raise CapsRefused("上限要填数字")  # "nan" or "inf" would turn the cap off unseen
    if (wanted.cost or 0) < 0 or (wanted.tokens or 0) < 0:
        raise CapsRefused("上限不能是负数")
    return wanted
