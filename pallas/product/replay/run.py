"""One replay from the store: read the window, run the gate under the settings of the day
and, when asked, under proposed ones, and price what it finds (docs/cost.md)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.local_time import SHANGHAI
from pallas.product.conversation.gate.policy import GatePolicy
from pallas.product.conversation.gate.trigger import LOTTERY_SEED
from pallas.product.replay.gate_replay import recorded_tally, replay
from pallas.product.replay.recorded import (
    ChatRef,
    policies_of_the_day,
    read_chat,
    recorded_calls,
)
from pallas.product.replay.report import PriceOf, ReplayReport, build_report, call_costs


class ReplayError(ValueError):
    """A replay that cannot run as asked; the message says why (Chinese, for the owner)."""


MAX_WINDOW = timedelta(days=7)  # a replay reads the whole window at once
EARLIEST = datetime(2000, 1, 1, tzinfo=SHANGHAI)
LATEST = datetime(2100, 1, 1, tzinfo=SHANGHAI)


def day_window(day: str) -> tuple[datetime, datetime]:
    """A calendar day in the bot's time zone (Asia/Shanghai), as a window."""
    try:
        start = datetime.fromisoformat(day).replace(tzinfo=SHANGHAI)
    except ValueError:
        raise ReplayError(f"日期看不懂：{day}（要写成 2026-12-05 这样）") from None
    if not EARLIEST <= start < LATEST:
        raise ReplayError("时间要在 2000 年到 2100 年之间")
    return checked_window(start, start + timedelta(days=1))


def checked_window(since: datetime, until: datetime) -> tuple[datetime, datetime]:
    if since.tzinfo is None or until.tzinfo is None or until <= since:
        raise ReplayError("时间要带时区，而且结束要晚于开始")
    if since < EARLIEST or until > LATEST:
        raise ReplayError("时间要在 2000 年到 2100 年之间")
    if until - since > MAX_WINDOW:
        raise ReplayError("一次最多重放 7 天")
    return since, until


def checked_proposal(defaults: GatePolicy, proposed: dict[str, Any]) -> dict[str, Any]:
    """The proposed gate knobs, or why they cannot be tried."""
    unknown = [name for name in proposed if name not in GatePolicy.model_fields]
    if unknown:
        raise ReplayError(f"没有这样的设置：{'、'.join(unknown)}")
    try:
        defaults.with_overrides(proposed)
    except ValueError as exc:
        raise ReplayError(f"设置的值不对：{exc}") from None
    return proposed


async def run_replay(
    engine: AsyncEngine,
    chat: ChatRef,
    window: tuple[datetime, datetime],
    proposed: dict[str, Any] | None,
    price_of: PriceOf,
    defaults: GatePolicy | None = None,
) -> ReplayReport:
    defaults = defaults or GatePolicy()
    since, until = window
    recorded = await read_chat(engine, chat, since, until)
    of_the_day = await policies_of_the_day(engine, chat, defaults, {})
    in_force = replay(recorded, of_the_day, LOTTERY_SEED, recorded_ambient=True)
    proposal = None
    if proposed:
        wanted = checked_proposal(defaults, proposed)
        policies = await policies_of_the_day(engine, chat, defaults, wanted)
        proposal = (wanted, replay(recorded, policies, LOTTERY_SEED, recorded_ambient=False))
    calls = await recorded_calls(engine, chat, since, until)
    costs = call_costs(calls, recorded_tally(in_force).passed, price_of)
    return build_report(chat, window, in_force, proposal, costs)
