"""What a replay reports, pure: the recorded decisions beside the replayed ones, and what the
model calls would cost. The gate's part is exact; the model's is an estimate at the recorded
calls per passed message and tokens per call, priced at the providers' prices now."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pallas.product.replay.gate_replay import (
    Replayed,
    Tally,
    recorded_tally,
    replayed_tally,
)
from pallas.product.replay.recorded import ChatRef, RecordedCall
from pallas.providers.catalog import Pricing

PriceOf = Callable[[str], Pricing | None]  # a model's prices now; None: not in the file


@dataclass(frozen=True)
class CallCosts:
    """The recorded calls of the window, as rates."""

    calls: int
    tokens: int
    cost: float  # as recorded, at the prices then
    per_pass: float | None  # model calls per message the gate let through; None: none passed
    tokens_per_call: float | None
    cost_per_call: float | None  # at today's prices; None: no call to measure


@dataclass(frozen=True)
class Estimate:
    calls: float
    tokens: float
    cost: float | None


@dataclass(frozen=True)
class ReplayReport:
    chat: ChatRef
    since: datetime
    until: datetime
    proposed: dict[str, Any]
    recorded: Tally
    in_force: Tally
    agreed: int
    disagreeing: tuple[int, ...]  # message ids the replay decided otherwise (the first few)
    proposal: Tally | None
    costs: CallCosts
    in_force_estimate: Estimate
    proposal_estimate: Estimate | None


def call_costs(calls: Sequence[RecordedCall], passes: int, price_of: PriceOf) -> CallCosts:
    tokens = sum(c.prompt_tokens + c.completion_tokens for c in calls)
    now_costs = [_cost_now(c, price_of) for c in calls]
    return CallCosts(
        calls=len(calls),
        tokens=tokens,
        cost=sum(c.cost for c in calls),
        per_pass=len(calls) / passes if passes else None,
        tokens_per_call=tokens / len(calls) if calls else None,
        cost_per_call=sum(now_costs) / len(calls) if calls else None,
    )


def _cost_now(call: RecordedCall, price_of: PriceOf) -> float:
    pricing = price_of(call.model)
    if pricing is None:
        return call.cost  # a model no longer in the file: what it cost then
    return pricing.cost(call.prompt_tokens, call.completion_tokens, call.cached_tokens)


def estimate(passes: int, costs: CallCosts) -> Estimate:
    """Calls, tokens and cost for this many passed messages at the recorded rates (one call
    per pass when nothing passed that day to measure by)."""
    per_pass = 1.0 if costs.per_pass is None else costs.per_pass
    calls = passes * per_pass
    tokens = calls * (costs.tokens_per_call or 0.0)
    cost = None if costs.cost_per_call is None else calls * costs.cost_per_call
    return Estimate(calls, tokens, cost)


def build_report(
    chat: ChatRef,
    window: tuple[datetime, datetime],
    in_force: list[Replayed],
    proposal: tuple[dict[str, Any], list[Replayed]] | None,
    costs: CallCosts,
) -> ReplayReport:
    proposed, replayed = proposal or ({}, None)
    agreeing = [r for r in in_force if r.agrees]
    in_force_tally = replayed_tally(in_force)
    proposal_tally = None if replayed is None else replayed_tally(replayed)
    return ReplayReport(
        chat=chat,
        since=window[0],
        until=window[1],
        proposed=proposed,
        recorded=recorded_tally(in_force),
        in_force=in_force_tally,
        agreed=len(agreeing),
        disagreeing=tuple(r.message_id for r in in_force if not r.agrees)[:20],
        proposal=proposal_tally,
        costs=costs,
        in_force_estimate=estimate(in_force_tally.passed, costs),
        proposal_estimate=(
            None if proposal_tally is None else estimate(proposal_tally.passed, costs)
        ),
    )
