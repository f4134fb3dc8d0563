"""The stage list: what happens to a committed message, in one order visible here.

Ingress persists a message and hands it to the list; each stage in turn says what it did:

    continue    nothing for this stage; the next one sees the message
    handled     this stage answered it; later stages do not see it
    suppressed  nobody may act on it (silence): it stays in the timeline, flagged, and no
                later stage, tool, model or other NoneBot plugin sees it

Every `handled` and `suppressed` writes one audit event naming the stage and its reason (the
gate, the last stage, writes its own). A stage that raises is logged once and audited as
`stage_failed`; the message stays stored and the next stage sees it as if it had continued.
The order itself is declared where the runtime is built (`pallas/app.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from loguru import logger

from pallas.product.conversation.ingress import CONTINUE, StageResult, StoredMessage, Verdict
from pallas.store.audit import EventKind
from pallas.store.ledger import LedgerEvent, LedgerWriter, SuppressMessage


class Stage(Protocol):
    """One step a committed message goes through. `name` appears in the audit."""

    name: str

    async def on_message(self, stored: StoredMessage) -> StageResult:
        """Decide on a new message from someone else."""


class OwnMessageObserver(Protocol):
    async def on_own_message(self, stored: StoredMessage) -> None:
        """The bot's own message was stored (the platform reported a send)."""


class StageList:
    """The ordered stages, as ingress's next stage."""

    def __init__(
        self, stages: Sequence[Stage], ledger: LedgerWriter, own: OwnMessageObserver
    ) -> None:
        self.stages = tuple(stages)
        self._ledger = ledger
        self._own = own

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(stage.name for stage in self.stages)

    async def on_message(self, stored: StoredMessage) -> StageResult:
        for stage in self.stages:
            result = await self._run(stage, stored)
            if result.verdict is Verdict.CONTINUE:
                continue
            await self._record(stage, stored, result)
            return result
        return CONTINUE

    async def on_own_message(self, stored: StoredMessage) -> None:
        await self._own.on_own_message(stored)

    async def _run(self, stage: Stage, stored: StoredMessage) -> StageResult:
        try:
            return await stage.on_message(stored)
        except Exception as exc:
            logger.opt(exception=exc).error(
                "stage {} failed for message {}", stage.name, stored.message_id
            )
            self._ledger.record(_event(EventKind.STAGE_FAILED, stage, stored, repr(exc)[:200]))
            return CONTINUE

    async def _record(self, stage: Stage, stored: StoredMessage, result: StageResult) -> None:
        if result.verdict is Verdict.SUPPRESSED:
            # Committed before ingress returns: nothing after this may see the message
            # unflagged, and a restart must not decide on it again.
            await self._ledger.write(
                SuppressMessage(stored.message_id),
                _event(EventKind.STAGE_SUPPRESSED, stage, stored, result.reason),
            )
            return
        self._ledger.record(_event(EventKind.STAGE_HANDLED, stage, stored, result.reason))


def _event(kind: EventKind, stage: Stage, stored: StoredMessage, reason: str) -> LedgerEvent:
    return LedgerEvent(
        kind=kind,
        stream_id=stored.stream_id,
        reason=reason,
        person_id=stored.sender_person_id,
        message_id=stored.message_id,
        payload={"stage": stage.name},
    )
