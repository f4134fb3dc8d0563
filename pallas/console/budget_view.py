"""Today's model spending against the caps, as the console shows and changes it (docs/cost.md):
the same numbers as `/预算`, and the same way to change today's caps (`caps_asked`)."""

from __future__ import annotations

from dataclasses import dataclass

from pallas.product.spending import CapsRefused, caps_asked
from pallas.providers.budget import DailyBudget


@dataclass(frozen=True)
class BudgetToday:
    day: str
    cost: float
    tokens: int
    cost_cap: float | None  # today's (an owner's for today, else .env's)
    token_cap: int | None
    configured_cost: float | None  # .env's, which tomorrow returns to
    configured_tokens: int | None


async def budget_today(budget: DailyBudget) -> BudgetToday:
    day, spent = await budget.today()
    today, configured = budget.today_limits, budget.limits
    return BudgetToday(
        day.isoformat(), spent.cost, spent.tokens, today.cost, today.tokens,
        configured.cost, configured.tokens,
    )  # fmt: skip


__all__ = ["BudgetToday", "CapsRefused", "budget_today", "caps_asked"]
