"""The turn: what a turn handler receives and what it may answer."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from pallas.core.inbound import StreamKey
from pallas.product.conversation.gate.facts import MessageFacts
from pallas.product.conversation.gate.gate import Disposition
from pallas.product.conversation.gate.trigger import SpeakTrigger
from pallas.product.conversation.ingress import StoredMessage


@dataclass(frozen=True)
class Admitted:
    """A committed message the ingress gate let through, waiting in its stream's buffer."""

    stored: StoredMessage
    facts: MessageFacts
    disposition: Disposition

    @property
    def sender_person_id(self) -> int:
        return self.stored.sender_person_id

    @property
    def message_id(self) -> int:
        return self.stored.message_id


@dataclass(frozen=True)
class Occasion:
    """Why the bot speaks on its own in a turn no message started (turns/proactive.py)."""

    reason: str  # stable snake_case, audited: private_follow_up, promise_due
    hint: str  # code-made words telling the model why it may speak now (trusted)
    key: str = ""  # what the turn is for (a job's key), for the trail


@dataclass(frozen=True)
class Turn:
    turn_id: int
    stream_id: int
    stream: StreamKey
    messages: tuple[StoredMessage, ...]
    text: str  # the batch's texts, one per line
    facts: MessageFacts  # merged over the batch
    disposition: Disposition  # the batch gate's decision
    trigger: SpeakTrigger
    timeline_size: int
    may_wait: bool
    watermark: int  # the newest message id of the batch: later rows are not "before" it
    # Set when the bot starts the turn itself: no message in the batch, nobody must be answered.
    occasion: Occasion | None = None

    @property
    def proactive(self) -> bool:
        return self.occasion is not None


class TurnDecision(StrEnum):
    DONE = "done"  # acted (or had nothing to do)
    SILENT = "silent"  # looked and chose silence: closes the natural reply window
    WAIT = "wait"  # hold the batch until more arrives


class TurnHandler(Protocol):
    async def handle(self, turn: Turn) -> TurnDecision: ...


class NoTurnHandler:
    """Used while no conversation agent is plugged in: turns run, nothing is said."""

    async def handle(self, turn: Turn) -> TurnDecision:
        return TurnDecision.DONE
