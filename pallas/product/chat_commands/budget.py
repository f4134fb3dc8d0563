"""`/预算`: today's model spending against the daily cap; an owner raises (or lowers) today's cap
from the chat (docs/cost.md). Tomorrow the caps of `.env` hold again."""

from __future__ import annotations

from pallas.product.conversation.commands import CommandCall
from pallas.product.spending import CapsRefused, caps_asked, spent_words
from pallas.providers.budget import BudgetLimits, DailyBudget

USAGE = (
    "用法：/预算 看今天的花费；/预算 <金额> 改今天的花费上限；/预算 tokens <数量> 改今天的用量上限"
)


class BudgetCommand:
    name = "预算"
    summary = "看今天的模型花费；改今天的上限：/预算 <金额> 或 /预算 tokens <数量>"

    def __init__(self, budget: DailyBudget | None) -> None:
        self._budget = budget

    async def run(self, call: CommandCall) -> str:
        budget = self._budget
        if budget is None:
            return "没有设每日预算（.env 里的 PALLAS_DAILY_BUDGET 或 PALLAS_DAILY_TOKEN_BUDGET）。"
        _day, spent = await budget.today()
        words = call.args.split()
        if not words:
            return f"今天：{spent_words(spent, budget.today_limits)}"
        wanted = today_caps(budget.today_limits, words)
        if wanted is None:
            return USAGE
        await budget.set_today(wanted)
        return f"好，今天的上限改成了：{spent_words(spent, wanted)}。明天恢复 .env 里的设置。"


def today_caps(current: BudgetLimits, words: list[str]) -> BudgetLimits | None:
    """The caps an owner asks for (pure): `<amount>` or `tokens <count>`; None: not understood."""
    if len(words) == 2 and words[0].lower() in ("tokens", "token", "用量"):
        cost, tokens = None, words[1]
    elif len(words) == 1:
        cost, tokens = words[0], None
    else:
        return None
    try:
        return caps_asked(current, cost, tokens)
    except CapsRefused:
        return None
