"""What people hear about the daily budget (docs/cost.md): the owners, once a day, by private
message when the cap is reached; a chat that calls the bot once the cap is reached, at most
once a day; and the words `/状态` uses for today's spend.

Both messages go through the outbox under a key per day, so a restart does not repeat them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import date

from loguru import logger
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import Origin
from pallas.core.inbound import Segment, SegmentKind, StreamKey, StreamKind
from pallas.product.conversation.delivery.contract import OutgoingMessage, Sender
from pallas.providers.budget import BudgetLimits, DailyBudget, Reached, Spend
from pallas.store.identities import ensure_stream
from pallas.store.models import Stream

CHAT_NOTICE = "今天的模型额度用完了，我先歇着，明天再聊。命令照常可以用。"


def owners_notice(spent: Spend, limits: BudgetLimits) -> str:
    return (
        f"今天的模型花费到上限了（{spent_words(spent, limits)}）：到明天零点之前我不再调用模型，"
        "命令和不用模型的固定回应照常。要提高今天的上限，发 /预算 <金额>；"
        "长期的上限在 .env 里的 PALLAS_DAILY_BUDGET。"
    )


def spent_words(spent: Spend, limits: BudgetLimits) -> str:
    """Today's spend against each cap, in Chinese."""
    parts = []
    if limits.cost is not None:
        parts.append(f"花费 {spent.cost:.4f} / 上限 {limits.cost:g}")
    if limits.tokens is not None:
        parts.append(f"用量 {spent.tokens} / 上限 {limits.tokens} tokens")
    return "，".join(parts)


def tell_owners(
    engine: AsyncEngine,
    sender: Sender,
    budget: DailyBudget,
    owners: Sequence[str],
    action_ids: Callable[[], int],
    clock: Callable[[], object],
) -> Reached:
    """The budget's `on_reached`: a private message to each owner, from the account of the
    chat that reached the cap (else the newest chat's)."""

    async def told(day: date, stream_id: int | None) -> None:
        account = await _account(engine, stream_id)
        if account is None or not owners:
            logger.warning("budget: cap reached on {}; no owner or account to tell", day)
            return
        _, spent = await budget.today()
        text = owners_notice(spent, budget.today_limits)
        for owner in owners:
            key = StreamKey(account[0], account[1], StreamKind.PRIVATE, owner)
            private = await ensure_stream(engine, key, clock())  # type: ignore[arg-type]
            await sender.send(
                OutgoingMessage(
                    action_ids(),
                    private,
                    (Segment(SegmentKind.TEXT, text=text),),
                    key=f"budget:{day.isoformat()}:{owner}",
                    origin=Origin.NOTICE,
                )
            )

    return told


async def _account(engine: AsyncEngine, stream_id: int | None) -> tuple[str, str] | None:
    query = select(Stream.platform, Stream.self_id)
    query = (
        query.where(Stream.id == stream_id)
        if stream_id is not None
        else query.order_by(Stream.id.desc()).limit(1)
    )
    async with engine.connect() as conn:
        row = (await conn.execute(query)).first()
    return None if row is None else (str(row.platform), str(row.self_id))


__all__ = ["CHAT_NOTICE", "owners_notice", "spent_words", "tell_owners"]


class CapsRefused(ValueError):
    """What the owner asked for cannot be a cap; the message says why (Chinese)."""


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
