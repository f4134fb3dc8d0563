"""`/预算`'s words: what an owner may ask for (pure)."""

from __future__ import annotations

import pytest

from pallas.product.chat_commands.budget import today_caps
from pallas.providers.budget import BudgetLimits

NOW = BudgetLimits(cost=0.02, tokens=1000)


@pytest.mark.parametrize(
    ("words", "wanted"),
    [
        (["0.05"], BudgetLimits(cost=0.05, tokens=1000)),
        (["0"], BudgetLimits(cost=0.0, tokens=1000)),
        (["tokens", "200000"], BudgetLimits(cost=0.02, tokens=200000)),
        (["用量", "5000"], BudgetLimits(cost=0.02, tokens=5000)),
        (["-1"], None),
        (["很多"], None),
        (["tokens", "1.5"], None),
        (["0.05", "0.06"], None),
    ],
)
def test_today_caps(words: list[str], wanted: BudgetLimits | None) -> None:
    assert today_caps(NOW, words) == wanted
