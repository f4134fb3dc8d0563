"""Why the bot is speaking up, and how much recent timeline that reason calls for."""

from __future__ import annotations

import hashlib
from enum import StrEnum

from pallas.product.conversation.gate.gate import Disposition, Reason, Signal

FULL_TIMELINE = 8
SHORT_TIMELINE = 4  # unprompted participation: a short view keeps it on topic


class SpeakTrigger(StrEnum):
    TO_ME = "to_me"  # @, reply to the bot, poke, private chat
    FOLLOWUP = "followup"  # the same person continuing shortly after an @
    ALIAS = "alias"  # the message opens with one of the bot's names
    MENTION = "mention"  # one of the bot's names appears in the message
    AMBIENT = "ambient"  # nobody addressed the bot


_TO_ME = frozenset({Signal.MENTIONED, Signal.REPLIED_TO_ME, Signal.POKED_ME})


def classify_speak_trigger(disposition: Disposition, opens_with_name: bool) -> SpeakTrigger:
    signals = disposition.signals
    if disposition.reason is Reason.DIRECT_CONVERSATION or signals & _TO_ME:
        return SpeakTrigger.TO_ME
    if Signal.FOLLOW_UP in signals:
        return SpeakTrigger.FOLLOWUP
    if Signal.CALLED_BY_NAME in signals:
        return SpeakTrigger.ALIAS if opens_with_name else SpeakTrigger.MENTION
    return SpeakTrigger.AMBIENT


def timeline_size(trigger: SpeakTrigger) -> int:
    return SHORT_TIMELINE if trigger is SpeakTrigger.AMBIENT else FULL_TIMELINE


# Fixed, so a replay of a recorded day draws the rolls the gate drew (replay/).
LOTTERY_SEED = "pallas-ambient"


def lottery_roll(seed: str, stream_id: int, message_id: int) -> float:
    """A replayable number in [0, 1): the same message always draws the same roll."""
    digest = hashlib.blake2b(f"{seed}:{stream_id}:{message_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64
