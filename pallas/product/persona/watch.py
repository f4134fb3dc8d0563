"""The persona stage, right after silence: what people say to the bot and of themselves.

  a message from someone else -> an attack on the bot? (attacks.py, with their favorability tier)
  -> rage (rage.py) and favorability (favor.py) each by their own rule, written at once
  -> crossed the threshold: this message is already ignored (suppressed), and so is what they
     say next until the silence ends (the silence policy below); a second silence within a day
     puts them on the chat's blacklist and the owners are told (notify.py)
  -> no attack: plain statements about themselves become relation notes (notes.py)

Only a message that might be an attack or a self-statement touches the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from loguru import logger
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKind
from pallas.core.text import typed_text
from pallas.product.conversation.ingress import CONTINUE, StageResult, StoredMessage, Verdict
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.persona.attacks import Attack, find_attack
from pallas.product.persona.config import RageConfig
from pallas.product.persona.favor import Tier, cooled, tier_of
from pallas.product.persona.notes import observed_notes
from pallas.product.persona.notify import PRIVATE_CHAT
from pallas.product.persona.rage import RageOutcome, RageReading, step_rage
from pallas.product.persona.store import PersonaStore, RageWrite
from pallas.store.audit import EventKind
from pallas.store.ledger import LedgerEvent, LedgerWriter
from pallas.store.models import Message

NOTIFY_KIND = "persona.notify_owners"
RAGE_REASON = "rage"


@dataclass
class WatchDeps:
    engine: AsyncEngine
    store: PersonaStore
    ledger: LedgerWriter
    jobs: Jobs
    owners: frozenset[str]
    names: tuple[str, ...]
    clock: Callable[[], datetime]
    # The `rage` knobs as they are now (a reader: the console changes them while the bot
    # runs): whether attacks are noticed at all (stored silences hold either way), whether
    # the model's [冒犯:…] counts too, and the pressure policy.
    rage: Callable[[], RageConfig]


class PersonaWatch:
    name = "persona"

    def __init__(self, deps: WatchDeps) -> None:
        self._deps = deps

    async def on_message(self, stored: StoredMessage) -> StageResult:
        msg = stored.message
        if not self._deps.rage().enabled:
            return CONTINUE
        if msg.from_bot or msg.is_poke or msg.sender.user_id in self._deps.owners:
            return CONTINUE
        words = typed_text(msg.segments)
        if not words.strip():
            return CONTINUE
        outcome = await self._attack(stored, words)
        if outcome is None:  # no attack: what they say of themselves may be a note
            await self._observe(stored, words)
        elif outcome in (RageOutcome.SILENCED, RageOutcome.BLACKLISTED):
            return StageResult(Verdict.SUPPRESSED, RAGE_REASON)
        return CONTINUE

    async def _attack(self, stored: StoredMessage, words: str) -> RageOutcome | None:
        """What the attack in the message did, or None when it holds none."""
        deps, self_id = self._deps, stored.message.stream.self_id
        person = stored.sender_person_id
        # The words first (pure, no store): most messages hold no attack and cost nothing more.
        if find_attack(words, at_bot=True, owner=False, tier=Tier.NEUTRAL) is None:
            return None
        score, warmed_on = await deps.store.favorability(self_id, person)
        attack = find_attack(words, at_bot=True, owner=False, tier=tier_of(score))
        if attack is None or not await self._at_bot(stored, words):
            return None
        now = deps.clock()
        await deps.store.set_favorability(
            self_id, person, cooled(score, attack.favor_loss), warmed_on, now
        )
        return await angered(stored, attack, now, deps)

    async def _at_bot(self, stored: StoredMessage, words: str) -> bool:
        msg = stored.message
        if msg.stream.kind is StreamKind.PRIVATE or msg.stream.self_id in msg.mentions:
            return True
        if any(name and name in words for name in self._deps.names):
            return True
        return msg.reply_to is not None and await self._quotes_bot(stored.stream_id, msg.reply_to)

    async def _quotes_bot(self, stream_id: int, platform_id: str) -> bool:
        query = select(Message.from_bot).where(
            Message.stream_id == stream_id, Message.platform_message_id == platform_id
        )
        async with self._deps.engine.connect() as conn:
            return bool(await conn.scalar(query))

    async def _observe(self, stored: StoredMessage, words: str) -> None:
        notes = observed_notes(words)
        self_id, now = stored.message.stream.self_id, self._deps.clock()
        for note in notes:
            await self._deps.store.add_note(self_id, stored.sender_person_id, note, "observed", now)


async def angered(
    stored: StoredMessage, attack: Attack, now: datetime, deps: WatchDeps
) -> RageOutcome:
    """Rage after `attack` in `stored` (the lexicon's or the model's): pressure, a silence past
    the threshold, the blacklist and the owners' notice on the second within the window."""
    stream_id, person = stored.stream_id, stored.sender_person_id
    row = await deps.store.rage(stream_id, person)
    reading = RageReading(row.pressure, row.updated_at) if row else None
    policy = deps.rage().policy()
    since = now - policy.escalate_within
    earlier = await deps.store.silences_since(stream_id, person, since)
    step = step_rage(reading, attack.rage, earlier, now, policy)
    blacklisted = step.outcome is RageOutcome.BLACKLISTED
    reason = f"两次静默不到{int(policy.escalate_within.total_seconds() // 3600)}小时"
    await deps.store.write_rage(
        RageWrite(stream_id, person, step.pressure, step.silenced_until,
                  reason if blacklisted else ""),
        now,
    )  # fmt: skip
    payload = {
        "attack": attack.kind.value,
        "evidence": attack.evidence,
        "pressure": round(step.pressure, 2),
        "outcome": step.outcome.value,
    }
    deps.ledger.record(
        LedgerEvent(EventKind.ATTACK_NOTED, stream_id, step.outcome.value,
                    person_id=person, message_id=stored.message_id, payload=payload)
    )  # fmt: skip
    if blacklisted:
        await _notify(stored, deps)
    return step.outcome


async def _notify(stored: StoredMessage, deps: WatchDeps) -> None:
    msg = stored.message
    group = msg.stream.kind is StreamKind.GROUP
    payload = {
        "stream_id": stored.stream_id,
        "platform": msg.stream.platform,
        "self_id": msg.stream.self_id,
        "group": msg.stream.external_id if group else PRIVATE_CHAT,
        "user_id": msg.sender.user_id,
        "name": msg.sender.display_name,
    }
    key = f"{NOTIFY_KIND}:{stored.stream_id}:{stored.message_id}"
    try:
        await deps.jobs.enqueue(NOTIFY_KIND, payload, key=key)
    except Exception as exc:  # the blacklist stands; only the owners' notice is lost
        logger.error("persona: owners not told of a blacklisting: {!r}", exc)


class RageSilence:
    """The silence policy: someone rage silenced, or on the chat's blacklist, is ignored."""

    def __init__(self, store: PersonaStore) -> None:
        self._store = store

    async def reason_to_silence(self, stored: StoredMessage, now: datetime) -> str | None:
        return await self._store.ignored_because(stored.stream_id, stored.sender_person_id, now)
