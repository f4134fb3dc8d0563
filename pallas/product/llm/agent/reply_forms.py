"""The form a decided reply takes on its way out: words, a sticker, a voice.

The agent decides what to say; forms decide how it goes out; listeners hear what the model
declared beside its words (a reply's or a silence's intent markers). Each form registered by a
feature (stickers, voice) sees the reply as the forms before it left it and may change it: a short
attitude with a sticker intent becomes that sticker alone, words answering a voice become a
voice. Forms run in registration order; one that fails is skipped with a log line, and the
reply goes out as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from loguru import logger

from pallas.product.conversation.delivery.contract import OutgoingMedia
from pallas.product.conversation.turns.turn import Turn
from pallas.product.llm.agent.output import Intent
from pallas.store.audit import EventKind


@dataclass(frozen=True)
class FormEvent:
    """Something a form wants in the turn's audit trail (a sticker that matched nothing)."""

    kind: EventKind
    reason: str
    payload: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplyShape:
    bubbles: tuple[str, ...]  # text bubbles, in order
    media: tuple[OutgoingMedia, ...] = ()  # sent after the bubbles, one message each
    events: tuple[FormEvent, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.bubbles and not self.media


@dataclass(frozen=True)
class FormContext:
    turn: Turn
    intents: tuple[Intent, ...]
    # What the turn's tools chose for the reply (`sticker.send` puts the sticker here).
    choices: Mapping[str, Any]
    now: datetime


class ReplyForm(Protocol):
    name: str

    async def shape(self, reply: ReplyShape, context: FormContext) -> ReplyShape: ...


class IntentListener(Protocol):
    """A feature that acts on what the model declared besides its words (a mood, a promise,
    an offence taken), whatever it decided; it changes nothing that is sent."""

    name: str

    async def heard(self, context: FormContext) -> None: ...


async def tell_listeners(listeners: Sequence[IntentListener], context: FormContext) -> None:
    for listener in listeners:
        try:
            await listener.heard(context)
        except Exception as exc:  # a broken listener must not cost the turn
            logger.opt(exception=exc).error(
                "turn {}: intent listener {} failed", context.turn.turn_id, listener.name
            )


async def apply_forms(
    forms: Sequence[ReplyForm], reply: ReplyShape, context: FormContext
) -> ReplyShape:
    for form in forms:
        try:
            reply = await form.shape(reply, context)
        except Exception as exc:  # a broken form must not cost the reply
            logger.opt(exception=exc).error(
                "turn {}: reply form {} failed", context.turn.turn_id, form.name
            )
    return reply
