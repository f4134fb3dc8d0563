"""The stage list: what happens to a committed message, in one order visible here.

Ingress persists a message and hands it to the list; each stage in turn says what it did:

    continue    nothing for this stage (or it acted and lets the others see the message too,
                a poke back, say: then it gives a reason); the next one sees the message
    handled     this stage answered it; later stages do not see it
    suppressed  nobody may act on it (silence): it stays in the timeline, flagged, and no
                later stage, tool, model or other NoneBot plugin sees it

Every decision with a reason writes one audit event naming the stage (`stage_acted`,
`stage_handled`, `stage_suppressed`; the gate, the last stage, writes its own). A stage that
raises is logged once and audited as `stage_failed`; the message stays stored and the next
stage sees it as if it had continued.

The order is declared once, where the runtime is built (`pallas/app.py`, STAGE_ORDER). Plugin
packages register their stage by name into its slot; the order never depends on which plugin
was loaded first, and an empty slot (its plugin not loaded) is skipped. Member changes (a join,
a leave) go to the stages that take them, in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from loguru import logger

from pallas.product.conversation.ingress import (
    CONTINUE,
    StageResult,
    StoredChange,
    StoredMessage,
    Verdict,
)
from pallas.store.audit import EventKind
from pallas.store.ledger import LedgerEvent, LedgerWriter, SuppressMessage


class Stage(Protocol):
    """One step a committed message goes through. `name` appears in the audit."""

    name: str

    async def on_message(self, stored: StoredMessage) -> StageResult:
        """Decide on a new message from someone else."""


@runtime_checkable
class ChangeStage(Protocol):
    """A stage that also acts on members joining and leaving."""

    name: str

    async def on_member_change(self, stored: StoredChange) -> StageResult: ...


@runtime_checkable
class OwnMessageObserver(Protocol):
    async def on_own_message(self, stored: StoredMessage) -> None:
        """The bot's own message was stored (the platform reported a send)."""


class StageList:
    """The ordered stages, as ingress's next stage."""

    def __init__(
        self,
        stages: Sequence[Stage],
        ledger: LedgerWriter,
        own: OwnMessageObserver,
        order: Sequence[str] = (),
    ) -> None:
        self._order = tuple(order) or tuple(stage.name for stage in stages)
        self._by_name: dict[str, Stage] = {}
        self.stages: tuple[Stage, ...] = ()
        self._ledger = ledger
        self._own = own
        for stage in stages:
            self.register(stage)

    @property
    def order(self) -> tuple[str, ...]:
        """The names of the stages that run, in the order they run."""
        return tuple(stage.name for stage in self.stages)

    def register(self, stage: Stage, *, before: str | None = None) -> None:
        """Put a stage into its declared slot; a feature's own stage (one the core's order
        does not name) gets a slot just before the stage `before` names."""
        if stage.name not in self._order and before in self._order:
            at = self._order.index(before)
            self._order = (*self._order[:at], stage.name, *self._order[at:])
        if stage.name not in self._order:
            raise ValueError(f"stage {stage.name!r} has no slot; the order is {self._order}")
        if stage.name in self._by_name:
            raise ValueError(f"stage {stage.name!r} is registered twice")
        self._by_name[stage.name] = stage
        self.stages = tuple(self._by_name[n] for n in self._order if n in self._by_name)

    async def on_message(self, stored: StoredMessage) -> StageResult:
        for stage in self.stages:
            result = await self._run(stage, stored)
            if result.reason or result.verdict is not Verdict.CONTINUE:
                await self._record(stage, stored, result)
            if result.verdict is not Verdict.CONTINUE:
                return result
        return CONTINUE

    async def on_own_message(self, stored: StoredMessage) -> None:
        """The gate first (its window opens), then every stage that watches the bot speak
        (learned lines: no pair spans the bot's line); one failing never stops the rest."""
        await self._own.on_own_message(stored)
        for stage in self.stages:
            if stage is self._own or not isinstance(stage, OwnMessageObserver):
                continue
            try:
                await stage.on_own_message(stored)
            except Exception as exc:
                logger.opt(exception=exc).error("stage {} failed on the bot's message", stage.name)

    async def on_member_change(self, stored: StoredChange) -> None:
        for stage in self.stages:
            if not isinstance(stage, ChangeStage):
                continue
            try:
                result = await stage.on_member_change(stored)
            except Exception as exc:
                logger.opt(exception=exc).error("stage {} failed on a member change", stage.name)
                continue
            if result.reason:
                self._ledger.record(_change_event(stage, stored, result))

    async def _run(self, stage: Stage, stored: StoredMessage) -> StageResult:
        try:
            return await stage.on_message(stored)
        except Exception as exc:
            logger.opt(exception=exc).error(
                "stage {} failed for message {}", stage.name, stored.message_id
            )
            failed = StageResult(Verdict.CONTINUE, repr(exc)[:200])
            self._ledger.record(_event(EventKind.STAGE_FAILED, stage, stored, failed))
            return CONTINUE

    async def _record(self, stage: Stage, stored: StoredMessage, result: StageResult) -> None:
        if result.verdict is Verdict.SUPPRESSED:
            # Committed before ingress returns: nothing after this may see the message
            # unflagged, and a restart must not decide on it again.
            await self._ledger.write(
                SuppressMessage(stored.message_id),
                _event(EventKind.STAGE_SUPPRESSED, stage, stored, result),
            )
            return
        kind = (
            EventKind.STAGE_HANDLED if result.verdict is Verdict.HANDLED else EventKind.STAGE_ACTED
        )
        self._ledger.record(_event(kind, stage, stored, result))


def _event(
    kind: EventKind, stage: Stage, stored: StoredMessage, result: StageResult
) -> LedgerEvent:
    return LedgerEvent(
        kind=kind,
        stream_id=stored.stream_id,
        reason=result.reason,
        turn_id=result.turn_id,
        person_id=stored.sender_person_id,
        message_id=stored.message_id,
        payload={"stage": stage.name},
    )


def _change_event(stage: Stage, stored: StoredChange, result: StageResult) -> LedgerEvent:
    return LedgerEvent(
        kind=EventKind.STAGE_ACTED,
        stream_id=stored.stream_id,
        reason=result.reason,
        turn_id=result.turn_id,
        person_id=stored.person_id,
        payload={"stage": stage.name, "user_id": stored.change.user_id},
    )
