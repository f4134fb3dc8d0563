"""Recent activity of one stream, as the gate needs it: a bounded, rebuildable cache.

It is a cache over the timeline and the ledger (see `activity_book.ActivityBook`), so a restart
loses nothing: the next message of a stream rebuilds its view from the store.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_US = timedelta(microseconds=1)
HORIZON = timedelta(hours=1)  # the longest window any gate knob looks back over
MAX_SIGHTINGS = 500


@dataclass(frozen=True)
class Sighting:
    message_id: int
    platform_message_id: str
    person_id: int
    at: datetime
    from_bot: bool = False
    mentioned_me: bool = False
    poked_me: bool = False
    replied_to_me: bool = False
    # The bot's line counts as it speaking in the conversation (core.actions.CONVERSATIONAL):
    # only those use the frequency cap and open the natural reply window.
    speaking: bool = True
    # `at` in whole microseconds since the epoch: the gate ages hundreds of sightings per
    # message, and integer arithmetic is several times cheaper than datetime arithmetic.
    us: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "us", epoch_us(self.at))

    @property
    def direct(self) -> bool:
        """Addressed to the bot by @, poke or reply."""
        return self.mentioned_me or self.poked_me or self.replied_to_me


def epoch_us(at: datetime) -> int:
    return (at - EPOCH) // ONE_US


def age_s(now_us: int, sighting: Sighting) -> float:
    """Seconds from the sighting to now: the same float as `(now - at).total_seconds()`."""
    return (now_us - sighting.us) / 1_000_000


class StreamActivity:
    def __init__(
        self,
        sightings: Iterable[Sighting] = (),
        ambient_turns: Iterable[datetime] = (),
        follow_up_declined: bool = False,
    ) -> None:
        self.sightings: deque[Sighting] = deque()
        self._ids: set[int] = set()
        self.ambient_turns: deque[datetime] = deque(ambient_turns, maxlen=64)
        self.follow_up_declined = follow_up_declined
        for sighting in sightings:
            self.add(sighting)

    def add(self, sighting: Sighting) -> None:
        """Record a message once (the view may already hold it from the store)."""
        if sighting.message_id in self._ids:
            return
        self.sightings.append(sighting)
        self._ids.add(sighting.message_id)
        if len(self.sightings) > MAX_SIGHTINGS:
            self._ids.discard(self.sightings.popleft().message_id)
        self._prune(sighting.at)

    def add_ambient_turn(self, at: datetime) -> None:
        self.ambient_turns.append(at)

    def is_bot_message(self, platform_message_id: str) -> bool | None:
        """True/False when the message is in view; None when it is older than the view."""
        for sighting in self.sightings:
            if sighting.platform_message_id == platform_message_id:
                return sighting.from_bot
        return None

    def _prune(self, now: datetime) -> None:
        cutoff = now - HORIZON
        while self.sightings and self.sightings[0].at < cutoff:
            self._ids.discard(self.sightings.popleft().message_id)
        while self.ambient_turns and self.ambient_turns[0] < cutoff:
            self.ambient_turns.popleft()
