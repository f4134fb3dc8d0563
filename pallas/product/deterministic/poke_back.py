"""Poke back: answer a poke with a poke, within per-person and per-stream limits.

The limits are counted from the bot's own pokes in the timeline (facts recorded only after
NapCat confirmed them), so they hold across restarts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

# NapCat may report the bot's own poke back to it with its own timestamp; a second record of
# the same poke lands within a few seconds of the first and is counted once.
ECHO_WINDOW = timedelta(seconds=5)


@dataclass(frozen=True)
class PokeLimits:
    person_cooldown: timedelta = timedelta(seconds=60)
    stream_max: int = 3
    stream_window: timedelta = timedelta(minutes=5)

    @property
    def lookback(self) -> timedelta:
        """How far back the caller must read the bot's pokes."""
        return max(self.person_cooldown, self.stream_window)


@dataclass(frozen=True)
class PokeRequest:
    poker: str  # platform user id of whoever poked
    target: str  # platform user id that was poked
    self_id: str  # the bot's platform user id


@dataclass(frozen=True)
class PastPoke:
    """A poke the bot sent in this stream."""

    target: str
    time: datetime


class PokeVerdict(StrEnum):
    POKE_BACK = "poke_back"
    NOT_FOR_ME = "not_for_me"
    PERSON_COOLDOWN = "person_cooldown"
    STREAM_LIMIT = "stream_limit"


def decide_poke_back(
    request: PokeRequest,
    sent: Sequence[PastPoke],
    now: datetime,
    limits: PokeLimits = PokeLimits(),
) -> PokeVerdict:
    if request.target != request.self_id or request.poker == request.self_id:
        return PokeVerdict.NOT_FOR_ME
    pokes = _distinct(sent)
    if any(p.target == request.poker and now - p.time < limits.person_cooldown for p in pokes):
        return PokeVerdict.PERSON_COOLDOWN
    in_window = sum(1 for p in pokes if now - p.time < limits.stream_window)
    if in_window >= limits.stream_max:
        return PokeVerdict.STREAM_LIMIT
    return PokeVerdict.POKE_BACK


def _distinct(sent: Sequence[PastPoke]) -> list[PastPoke]:
    """Collapse records of one poke (same target, within ECHO_WINDOW of the previous)."""
    kept: list[PastPoke] = []
    for poke in sorted(sent, key=lambda p: p.time):
        last = next((k for k in reversed(kept) if k.target == poke.target), None)
        if last is None or poke.time - last.time > ECHO_WINDOW:
            kept.append(poke)
    return kept
