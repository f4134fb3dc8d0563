"""Each group's effective gate policy, read from the store and cached briefly."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.gate.policy import GatePolicy, effective_policy
from pallas.store import kernel_state
from pallas.store.sql import BoundedCache

POLICY_TTL = timedelta(seconds=30)


class PolicyBook:
    """Each group's effective policy: the defaults plus its stored overrides (cached briefly)."""

    def __init__(self, engine: AsyncEngine, defaults: GatePolicy) -> None:
        self._engine = engine
        self.defaults = defaults
        self._cache: BoundedCache[int, tuple[GatePolicy, datetime]] = BoundedCache(5_000)

    async def save(self, stream_id: int, overrides: dict[str, Any], now: datetime) -> GatePolicy:
        """Validate and store a group's overrides; they apply from the next message."""
        policy = self.defaults.with_overrides(overrides)  # raises on an invalid knob
        await kernel_state.save_policy_overrides(self._engine, stream_id, overrides, now)
        self._cache.put_all({stream_id: (policy, now)})
        return policy

    async def get(self, stream_id: int, now: datetime) -> GatePolicy:
        hit = self._cache.get(stream_id)
        if hit is not None and now - hit[1] < POLICY_TTL:
            return hit[0]
        overrides = await kernel_state.policy_overrides(self._engine, stream_id)
        policy, problem = effective_policy(self.defaults, overrides)
        if problem:
            logger.warning("stream {}: {}", stream_id, problem)
        self._cache.put_all({stream_id: (policy, now)})
        return policy
