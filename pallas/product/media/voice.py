"""Voice replies: words that answer a voice (or a request to speak) go out as a voice.

  reply's words + the batch's newest message was a voice, or someone asked for one
  -> the `tts` model speaks them -> the audio is kept in the asset store (source `generated`)
  -> one record segment, "[语音：<the words>]" in the timeline, instead of the text bubbles

Long answers stay text: a minute of speech is worse than a paragraph to read. Without a `tts`
model, or when it fails, the words go out as text (with a log line).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from loguru import logger

from pallas.core.inbound import MediaRef, Segment, SegmentKind
from pallas.core.media import VOICE_PLACEHOLDER, NotMedia, described
from pallas.product.conversation.delivery.contract import OutgoingMedia
from pallas.product.conversation.turns.turn import Turn
from pallas.product.llm.agent.reply_forms import FormContext, ReplyShape
from pallas.product.media.config import MediaConfig
from pallas.providers.catalog import ModelType
from pallas.providers.errors import ProviderError
from pallas.providers.manager import ModelManager
from pallas.providers.results import CallTag, Purpose
from pallas.store.asset_store import AssetStore

MAX_SPOKEN_CHARS = 120
ASK_WORDS = (
    "语音回",
    "发语音",
    "用语音",
    "语音说",
    "说句话听",
    "念给我听",
    "读给我听",
    "听听你的声音",
)


def wants_voice(turn: Turn) -> bool:
    """The newest message someone else sent in the batch is a voice, or asks for one (pure)."""
    theirs = [m for m in turn.messages if not m.message.from_bot]
    if not theirs:
        return False
    newest = theirs[-1].message
    spoke = any(s.kind is SegmentKind.RECORD for s in newest.segments)
    return spoke or any(word in newest.text for word in ASK_WORDS)


class VoiceReply:
    """The reply form: speak the words when the other side spoke or asked for a voice."""

    name = "voice"

    def __init__(
        self,
        models: ModelManager,
        assets: AssetStore,
        clock: Callable[[], datetime],
        config: Callable[[], MediaConfig],
    ) -> None:
        self._models = models
        self._assets = assets
        self._clock = clock
        self._config = config  # voice_replies, tts_voice: asked at every reply

    async def shape(self, reply: ReplyShape, context: FormContext) -> ReplyShape:
        words = "\n".join(reply.bubbles)
        if not self._config().voice_replies or not words or len(words) > MAX_SPOKEN_CHARS:
            return reply
        if not wants_voice(context.turn):
            return reply
        if not self._models.has(ModelType.TTS):
            return reply
        spoken = await self._speak(words, context.turn)
        if spoken is None:
            return reply
        return ReplyShape((), (*reply.media, spoken), reply.events)

    async def _speak(self, words: str, turn: Turn) -> OutgoingMedia | None:
        tag = CallTag(Purpose.SPEECH, turn.stream_id, turn.turn_id)
        try:
            result = await self._models.speak(words, tag=tag, voice=self._config().tts_voice)
            asset = await self._assets.put(result.audio, self._clock(), source="generated")
        except (ProviderError, NotMedia) as exc:
            logger.warning("turn {}: reply not spoken, sent as text: {!r}", turn.turn_id, exc)
            return None
        one_line = " ".join(words.split())
        segment = Segment(
            SegmentKind.RECORD,
            text=described(VOICE_PLACEHOLDER, one_line),
            media=MediaRef(file=asset.reference),
        )
        return OutgoingMedia(segment)
