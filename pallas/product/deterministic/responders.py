"""The deterministic responders as stages: repeat, poke back, welcome and farewell.

Each decides with the pure rules beside it (repeat.py, poke_back.py, notices.py) and answers
through the outbox like everything else the bot does: under an action id (a turn id of its
own, so `trace` finds the rows), with an idempotency key made from what it answers, so that
running again for the same message after a crash queues nothing twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import Origin, Poke
from pallas.core.text import describe_inbound
from pallas.product.conversation.delivery.contract import OutgoingMessage, Sender
from pallas.product.conversation.delivery.payload import PayloadError
from pallas.product.conversation.ingress import (
    CONTINUE,
    StageResult,
    StoredChange,
    StoredMessage,
    Verdict,
)
from pallas.product.deterministic.notices import (
    NOTICES_FILE,
    OFF,
    GroupNotices,
    decide_notice,
    load_notices,
    render_notice,
)
from pallas.product.deterministic.poke_back import (
    PastPoke,
    PokeLimits,
    PokeRequest,
    PokeVerdict,
    decide_poke_back,
)
from pallas.product.deterministic.recent import TimelineLine, bot_pokes_since, lines_up_to
from pallas.product.deterministic.repeat import (
    REPEAT_WINDOW,
    ContentKey,
    RecentLine,
    decide_repeat,
    segments_key,
)
from pallas.product.settings.features import Feature, FeatureGate
from pallas.store.outbox import OutboxStore
from pallas.store.sql import BoundedCache

NAME_LOOKUP_TIMEOUT_S = 3.0
POKE_LIMITS = PokeLimits()

# A member's name as the platform knows it: (bot account, user id) -> nickname or None.
NameLookup = Callable[[str, str], Awaitable[str | None]]


@dataclass
class ResponderDeps:
    engine: AsyncEngine
    sender: Sender
    outbox: OutboxStore
    action_ids: Callable[[], int]  # the turn-id sequence: an action is traced like a turn
    clock: Callable[[], datetime]
    data_dir: Path
    names: NameLookup
    features: FeatureGate  # each group's switches (repeat, notices) and notice lines


class LastContent:
    """Each group's newest content key: a prefilter so the timeline is read only when a
    message may repeat its predecessor. A cache (bounded, empty after a restart: then the
    timeline is read), never the decision itself, which always comes from the timeline."""

    def __init__(self, capacity: int = 5_000) -> None:
        self._keys: BoundedCache[int, ContentKey] = BoundedCache(capacity)

    def may_repeat(self, stream: int, key: ContentKey | None) -> bool:
        if key is None:  # pokes, recalls, empty text neither count nor break a run
            return False
        previous = self._keys.get(stream)
        self._keys.put_all({stream: key})
        return previous is None or previous == key


class RepeatStage:
    """Echo a message once when two different members sent it in a row."""

    name = "repeat"

    def __init__(self, deps: ResponderDeps) -> None:
        self._deps = deps
        self._last = LastContent()

    async def on_message(self, stored: StoredMessage) -> StageResult:
        msg = stored.message
        key = segments_key(msg.text, msg.segments, is_poke=msg.is_poke)
        if not self._last.may_repeat(stored.stream_id, key):
            return CONTINUE
        if not await self._deps.features.allows(stored.stream_id, Feature.REPEAT):
            return CONTINUE
        rows = await lines_up_to(
            self._deps.engine, msg.stream, msg.platform_message_id, REPEAT_WINDOW
        )
        decision = decide_repeat([_recent(row) for row in rows])
        if decision is None:
            return CONTINUE
        action = self._deps.action_ids()
        outgoing = OutgoingMessage(
            action,
            stored.stream_id,
            decision.segments,
            key=f"repeat:{stored.message_id}",
            origin=Origin.RESPONDER,
            account=msg.stream.self_id,
        )
        try:
            await self._deps.sender.send(outgoing)
        except PayloadError as exc:
            logger.warning("not repeating {}: {}", describe_inbound(msg), exc)
            return CONTINUE
        logger.info("repeating after {}", describe_inbound(msg))
        return StageResult(Verdict.HANDLED, "repeated", action)


class PokeBackStage:
    """Poke back whoever pokes the bot, within per-person and per-chat limits."""

    name = "poke_back"

    def __init__(self, deps: ResponderDeps, limits: PokeLimits = POKE_LIMITS) -> None:
        self._deps = deps
        self._limits = limits
        # One poke is decided at a time: two quick pokes must not both pass the limit check
        # before the first poke back is queued. Pokes are rare; one lock for all chats.
        self._one_at_a_time = asyncio.Lock()

    async def on_message(self, stored: StoredMessage) -> StageResult:
        msg = stored.message
        if not msg.is_poke or not msg.mentions:
            return CONTINUE
        request = PokeRequest(msg.sender.user_id, msg.mentions[0], msg.stream.self_id)
        async with self._one_at_a_time:
            past = await self._past(stored)
            verdict = decide_poke_back(request, past, self._deps.clock(), self._limits)
            if verdict is not PokeVerdict.POKE_BACK:
                if verdict is not PokeVerdict.NOT_FOR_ME:
                    logger.info("poke from {} not returned: {}", request.poker, verdict)
                return CONTINUE
            action = self._deps.action_ids()
            key = f"poke_back:{stored.message_id}"
            await self._deps.sender.act(
                action, stored.stream_id, Poke(request.poker), origin=Origin.RESPONDER, key=key,
                account=stored.message.stream.self_id,
            )
        # The agent may still answer the poke in words: the stage acts and goes on.
        return StageResult(Verdict.CONTINUE, "poked_back", action)

    async def _past(self, stored: StoredMessage) -> list[PastPoke]:
        """The bot's pokes in the lookback: confirmed ones, and ones queued but not sent."""
        since = self._deps.clock() - self._limits.lookback
        sent = await bot_pokes_since(self._deps.engine, stored.message.stream, since)
        queued = await self._deps.outbox.open_pokes(stored.stream_id)
        return [PastPoke(p.target, p.time) for p in sent] + [
            PastPoke(target, at) for target, at in queued
        ]


class NoticeStage:
    """Welcome joining members and see off leaving ones, where the group enabled it."""

    name = "notices"

    def __init__(self, deps: ResponderDeps, lookup_timeout_s: float = NAME_LOOKUP_TIMEOUT_S):
        self._deps = deps
        self._lookup_timeout_s = lookup_timeout_s

    async def on_message(self, stored: StoredMessage) -> StageResult:
        return CONTINUE

    async def on_member_change(self, stored: StoredChange) -> StageResult:
        change = stored.change
        if not await self._deps.features.allows(stored.stream_id, Feature.NOTICES):
            return CONTINUE
        template = decide_notice(change, await self._settings(stored))
        if template is None:
            return CONTINUE
        name = await self._name(change.stream.self_id, change.user_id)
        segments = render_notice(template, user_id=change.user_id, name=name)
        action = self._deps.action_ids()
        # A redelivered notice carries the same time: the key keeps it to one greeting.
        kind = "welcome" if change.joined else "farewell"
        key = f"{kind}:{stored.stream_id}:{change.user_id}:{int(change.time.timestamp())}"
        outgoing = OutgoingMessage(action, stored.stream_id, segments, key, origin=Origin.RESPONDER,
                                   account=change.stream.self_id)  # fmt: skip
        await self._deps.sender.send(outgoing)
        return StageResult(Verdict.CONTINUE, kind, action)

    async def _settings(self, stored: StoredChange) -> GroupNotices:
        """The group's notices from the store; the older notices.json file only for a group
        that never set them in the console."""
        kept = await self._deps.features.notices(stored.stream_id)
        if kept is not None:
            return GroupNotices(
                welcome=kept.welcome_text if kept.welcome else False,
                farewell=kept.farewell_text if kept.farewell else False,
            )
        groups = load_notices(self._deps.data_dir / NOTICES_FILE)
        return groups.get(stored.change.stream.external_id, OFF)

    async def _name(self, self_id: str, user_id: str) -> str:
        try:
            async with asyncio.timeout(self._lookup_timeout_s):
                return await self._deps.names(self_id, user_id) or user_id
        except TimeoutError:
            return user_id


def _recent(row: TimelineLine) -> RecentLine:
    return RecentLine(
        sender_person_id=row.sender_person_id,
        from_bot=row.from_bot,
        text=row.text,
        segments=row.segments,
        is_poke=row.is_poke,
        recalled=row.recalled,
        suppressed=row.suppressed,
    )
