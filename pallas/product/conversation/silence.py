"""The first stage: silence. A silenced message is received and recorded, and nothing else.

Receiving, recording, handling and answering a message are four different things: a member the
bot is ignoring (blocked by the owner; later, whoever made it angry) still shows up in the
timeline the others read, but no command, responder, tool, model or other plugin acts on
what they say. The policy decides; this stage only applies it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Protocol

from pallas.product.conversation.ingress import CONTINUE, StageResult, StoredMessage, Verdict

BLOCKED_REASON = "blocked_user"


class SilencePolicy(Protocol):
    async def reason_to_silence(self, stored: StoredMessage, now: datetime) -> str | None:
        """Why nobody may act on this message, or None."""


class BlockedUsers:
    """The owner's block list (`PALLAS_BLOCKED_USERS`): these accounts are never answered."""

    def __init__(self, user_ids: Iterable[str]) -> None:
        self._blocked = frozenset(str(user_id) for user_id in user_ids)

    async def reason_to_silence(self, stored: StoredMessage, now: datetime) -> str | None:
        return BLOCKED_REASON if stored.message.sender.user_id in self._blocked else None


class SilenceStage:
    name = "silence"

    def __init__(self, policies: Iterable[SilencePolicy], clock: Callable[[], datetime]) -> None:
        self._policies = list(policies)
        self._clock = clock

    def add(self, policy: SilencePolicy) -> None:
        """Another reason to ignore someone (a feature adds its own when loaded: rage)."""
        self._policies.append(policy)

    async def on_message(self, stored: StoredMessage) -> StageResult:
        now = self._clock()
        for policy in self._policies:
            reason = await policy.reason_to_silence(stored, now)
            if reason is not None:
                return StageResult(Verdict.SUPPRESSED, reason)
        return CONTINUE
