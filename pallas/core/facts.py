"""Facts about people and groups, as features other than memory hand them to it (a sticker
someone favours): the shapes of the core's facts port (pallas/product/extensions.py). The
memory feature keeps them; with memory off nothing is kept."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class MemoryKind(StrEnum):
    FACT = "fact"  # about a person (person_id) or the group (person_id None)
    EPISODE = "episode"  # a summary of a long session
    BEHAVIOR = "behavior"  # how the group taught the bot to behave: guidance, not a fact


@dataclass(frozen=True)
class NewMemory:
    kind: MemoryKind
    stream_id: int
    person_id: int | None
    text: str
    source: str  # extraction / owner / sticker_habit / ...
    source_message_ids: tuple[int, ...] = ()
    taught_by: int | None = None
    job_id: int | None = None
    confidence: float = 0.6
    # A group entry one member said: kept aside, not recalled, until a second member says it
    # or an admin teaches it (docs/memory.md, "Who may change group knowledge").
    heard: bool = False
