"""Learned lines on the console (docs/classic.md): every group's pairs and bans, deleting a
pair, banning or lifting one; the page's script draws from these routes.

  GET    /pallas/api/learned                  pairs (most established first) and bans
  DELETE /pallas/api/learned/pairs/{id}       forget a pair (it may be learned again)
  POST   /pallas/api/learned/pairs/{id}/ban   ban its answer for its context, in every group
  DELETE /pallas/api/learned/bans/{id}        lift a ban
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException

from pallas.platform.http_params import RowId
from pallas.product.classic.learning import Learning
from pallas.product.classic.store import LearnedStore
from pallas.product.ports import OwnerPage

CONSOLE_ACTOR = 0  # who banned: the owner at the console (no person row)

LEARNED_PAGE = OwnerPage(
    key="learned",
    title="学来的话",
    intro="各个群教会机器人的接话，和不许它再说的：可以禁掉、删掉，也可以解禁。",
    script=Path(__file__).parent / "static" / "learned.js",
)


def learned_routes(
    store: LearnedStore, learning: Learning, clock: Callable[[], datetime]
) -> APIRouter:
    """Every change here reaches the stage at once (the learning's generation)."""
    router = APIRouter()

    @router.get("/learned", tags=["learned"])
    async def learned() -> dict[str, Any]:
        pairs = await store.pairs(None, limit=200)
        bans = await store.all_bans()
        return {
            "pairs": [asdict(p) for p in pairs],
            "bans": [{"stream_id": sid, **asdict(ban)} for sid, ban in bans],
        }

    @router.delete("/learned/pairs/{pair_id}", tags=["learned"])
    async def forget(pair_id: RowId) -> dict[str, bool]:
        if not await store.forget(pair_id, None):
            raise HTTPException(404, "没有这一条")
        learning.changed()
        return {"forgotten": True}

    @router.post("/learned/pairs/{pair_id}/ban", tags=["learned"])
    async def ban(pair_id: RowId) -> dict[str, bool]:
        pair = await store.pair(pair_id)
        if pair is None:
            raise HTTPException(404, "没有这一条")
        await store.ban(None, pair, CONSOLE_ACTOR, clock())  # the owner's: every group
        learning.changed()
        return {"banned": True}

    @router.delete("/learned/bans/{ban_id}", tags=["learned"])
    async def lift(ban_id: RowId) -> dict[str, bool]:
        if not await store.lift(ban_id, None, owner=True):
            raise HTTPException(404, "没有这一条")
        learning.changed()
        return {"lifted": True}

    return router
