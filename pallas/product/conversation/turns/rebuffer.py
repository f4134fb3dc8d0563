"""After a restart: messages the gate let through but no turn consumed, if still fresh."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKind
from pallas.product.conversation.gate.facts import MessageFacts
from pallas.product.conversation.gate.gate import Disposition, Outcome, Reason, Signal
from pallas.product.conversation.ingress import StoredMessage
from pallas.product.conversation.turns.buffers import TurnBuffers
from pallas.product.conversation.turns.turn import Admitted
from pallas.store import kernel_state
from pallas.store.processes import EVERYONE, Owners


async def rebuffer_unconsumed(
    engine: AsyncEngine,
    turn_buffers: TurnBuffers,
    since: datetime,
    *,
    owed: Collection[int] = (),
    horizon: datetime | None = None,
    owners: Owners = EVERYONE,
) -> int:
    """Re-buffer admitted, unconsumed messages stored after `since`, and those a retry is
    owed to (`owed`, whatever their age); older ones stay history."""
    pending = await kernel_state.unconsumed_admitted(
        engine, since, owed=owed, horizon=horizon, owners=owners
    )
    for row in pending:
        stored = StoredMessage(row.message_id, row.stream_id, row.person_id, row.message)
        turn_buffers.submit(
            Admitted(
                stored,
                MessageFacts.from_json(row.payload.get("facts", {})),
                _disposition(row.payload),
            ),
            private=row.message.stream.kind is StreamKind.PRIVATE,
        )
    if pending:
        logger.info("re-buffered {} message(s) that were waiting for a turn", len(pending))
    return len(pending)


def _disposition(payload: dict[str, object]) -> Disposition:
    signals = payload.get("signals") or []
    return Disposition(
        Outcome(str(payload.get("outcome", "deliberate"))),
        Reason(str(payload.get("reason", "attention")))
        if "reason" in payload
        else Reason.ATTENTION,
        frozenset(Signal(str(s)) for s in signals),  # type: ignore[union-attr]
    )
