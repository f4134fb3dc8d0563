"""Sticker replies: the model states a feeling, the code picks the sticker.

  reply with a sticker intent ([表情:哈哈]) or a sticker chosen by `sticker.send`
  -> pick from the collection (pure: the feeling's label first, then the caption's words,
     the least recently sent of the best, ties broken by the rng passed in)
  -> a short attitude ("哈哈", "确实") goes out as the sticker alone, never the sticker and the
     same words; longer words go out first, the sticker after them
  -> nothing matched: `sticker_missed` in the turn's trail, the words go out as they were

A sticker's use is counted when the platform confirms the send (a receipt listener), not when
it is chosen.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from pallas.core.inbound import MediaRef, Segment, SegmentKind
from pallas.core.media import STICKER_PLACEHOLDER, described
from pallas.core.terms import index_terms
from pallas.product.conversation.delivery.contract import OutgoingMedia
from pallas.product.conversation.delivery.dispatcher import ReceiptListener
from pallas.product.llm.agent.output import IntentKind
from pallas.product.llm.agent.reply_forms import FormContext, FormEvent, ReplyShape
from pallas.product.media.sticker_store import LibrarySticker, StickerLibrary
from pallas.product.settings.features import Feature, FeatureGate
from pallas.store.audit import EventKind
from pallas.store.outbox import OutboxRow

ATTITUDE_CHARS = 6  # words this short say no more than the sticker does
CHOSEN = "sticker"  # the key `sticker.send` puts its choice under, in the turn's choices
MARK = "sticker"  # the outbox row mark holding the sticker's hash
_NEVER = datetime.min.replace(tzinfo=UTC)
_QUIET = " \t\n，,。.！!？?~～…"


def match_score(wanted: str, sticker: LibrarySticker) -> int:
    """How well a sticker fits a stated feeling: 0 is no fit (pure)."""
    wanted = wanted.strip()
    if not wanted:
        return 0
    if wanted in sticker.emotions:
        return 3
    if wanted in sticker.caption or (sticker.caption and sticker.caption in wanted):
        return 2
    shared = set(index_terms(wanted)) & set(index_terms(sticker.caption))
    return 1 if shared else 0


def pick_sticker(
    wanted: str, stickers: Sequence[LibrarySticker], rng: random.Random
) -> LibrarySticker | None:
    """The best fit, the least recently sent among equals, ties broken by `rng` (pure)."""
    scored = [(match_score(wanted, s), s) for s in stickers]
    best = max((score for score, _ in scored), default=0)
    if best == 0:
        return None
    fits = [s for score, s in scored if score == best]
    oldest = min(s.last_sent_at or _NEVER for s in fits)
    return rng.choice([s for s in fits if (s.last_sent_at or _NEVER) == oldest])


def is_attitude(bubbles: Sequence[str]) -> bool:
    """Words a sticker says by itself: at most one short bubble (pure)."""
    return len(bubbles) <= 1 and len("".join(bubbles).strip(_QUIET)) <= ATTITUDE_CHARS


def sticker_media(sticker: LibrarySticker) -> OutgoingMedia:
    segment = Segment(
        SegmentKind.IMAGE,
        text=described(STICKER_PLACEHOLDER, sticker.caption),
        media=MediaRef(file=sticker.reference),
    )
    return OutgoingMedia(segment, {MARK: sticker.sha256})


class StickerReply:
    """The reply form: a sticker intent or a chosen sticker becomes a sticker message."""

    name = "sticker"

    def __init__(
        self,
        library: StickerLibrary,
        rng: Callable[[], random.Random],
        features: FeatureGate | None = None,
        enabled: Callable[[], bool] = lambda: True,
    ) -> None:
        self._library = library
        self._rng = rng
        self._features = features
        self._enabled = enabled  # all chats; asked at every reply: the console may switch it

    async def shape(self, reply: ReplyShape, context: FormContext) -> ReplyShape:
        wanted = [i.value for i in context.intents if i.kind is IntentKind.STICKER and i.value]
        chosen = context.choices.get(CHOSEN)
        if not wanted and not chosen:
            return reply
        if not self._enabled():  # a sticker-only reply says its feeling in words
            return reply
        if self._features and not await self._features.allows(
            context.turn.stream_id, Feature.STICKERS
        ):  # switched off here: a sticker-only reply says its feeling in words
            return reply
        stickers = await self._library.enabled()
        sticker = next((s for s in stickers if s.sha256 == chosen), None)
        if sticker is None and wanted:
            sticker = pick_sticker(wanted[0], stickers, self._rng())
        if sticker is None:
            missed = FormEvent(
                EventKind.STICKER_MISSED, wanted[0] if wanted else "", {"stickers": len(stickers)}
            )
            return ReplyShape(reply.bubbles, reply.media, (*reply.events, missed))
        bubbles = () if is_attitude(reply.bubbles) else reply.bubbles
        return ReplyShape(bubbles, (*reply.media, sticker_media(sticker)), reply.events)


def sticker_receipts(library: StickerLibrary, clock: Callable[[], datetime]) -> ReceiptListener:
    """The outbox receipt listener counting a sticker's use once it was sent."""

    async def counted(row: OutboxRow) -> None:
        sha = (row.payload.get("marks") or {}).get(MARK)
        if sha:
            await library.count_sent(str(sha), clock())

    return counted
