"""The console API's cost routes (docs/cost.md): today's spend against the caps, today's caps
changed, and the replay of a recorded window.

  GET /pallas/api/budget              today's spend, today's caps and .env's
  PUT /pallas/api/budget              {"cost": 0.5} and/or {"tokens": 200000}: today's caps
  GET /pallas/api/replay?group=..&day=..[&set=name=value...]   the replay's report (JSON)
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.console.budget_view import CapsRefused, budget_today, caps_asked
from pallas.console.replay import ReplayAsked, replay_in_console
from pallas.product.replay.render import as_json
from pallas.product.replay.run import ReplayError
from pallas.providers.budget import DailyBudget
from pallas.providers.catalog import Catalog

MAX_CHANGES = 20
NO_BUDGET = "没有设每日预算（.env 里的 PALLAS_DAILY_BUDGET 或 PALLAS_DAILY_TOKEN_BUDGET）"


def cost_routes(engine: AsyncEngine, catalog: Catalog, budget: DailyBudget | None) -> APIRouter:
    router = APIRouter()

    @router.get("/budget", tags=["models"])
    async def get_budget() -> dict[str, Any]:
        if budget is None:
            return {"active": False, "reason": NO_BUDGET}
        return {"active": True, **asdict(await budget_today(budget))}

    @router.put("/budget", tags=["models"])
    async def put_budget(changes: dict[str, Any]) -> dict[str, Any]:
        if budget is None:
            raise HTTPException(400, NO_BUDGET)
        unknown = set(changes) - {"cost", "tokens"}
        if unknown:
            raise HTTPException(400, f"只能改 cost 和 tokens（收到 {sorted(unknown)}）")
        try:
            wanted = caps_asked(budget.today_limits, changes.get("cost"), changes.get("tokens"))
        except CapsRefused as exc:
            raise HTTPException(400, str(exc)) from None
        await budget.set_today(wanted)
        return {"active": True, **asdict(await budget_today(budget))}

    @router.get("/replay", tags=["models"])
    async def get_replay(
        group: str = Query(..., max_length=20),
        day: str | None = Query(None, max_length=10),
        since: str | None = Query(None, max_length=40),
        until: str | None = Query(None, max_length=40),
        account: str | None = Query(None, max_length=20),
        changes: Annotated[list[str] | None, Query(alias="set")] = None,
    ) -> dict[str, Any]:
        proposed = tuple(changes or ())
        if len(proposed) > MAX_CHANGES or any(len(c) > 200 for c in proposed):
            raise HTTPException(400, f"最多提议 {MAX_CHANGES} 项设置，每项不超过 200 字")
        asked = ReplayAsked(group, day, since, until, account, proposed)
        try:
            report = await replay_in_console(engine, catalog, asked)
        except ReplayError as exc:
            raise HTTPException(400, str(exc)) from None
        return as_json(report)

    return router
