"""Plugging the bot's feelings into the core: the persona stage (attacks, rage, observed notes),
the rage silence policy, the owners' notice jobs, warmth after turns, the relations context
source and the owner's commands (docs/persona.md)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.platform.smtp import SmtpConfig
from pallas.product.conversation.commands import CommandStage
from pallas.product.conversation.delivery.contract import Sender
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.conversation.silence import SilenceStage
from pallas.product.conversation.stages import StageList
from pallas.product.conversation.turns.observers import TurnObservers
from pallas.product.llm.agent.reply_forms import ReplyForm
from pallas.product.llm.assembler.context import ContextSource, Persona, PersonaSource
from pallas.product.persona.commands import (
    BlacklistCommand,
    FavorCommand,
    LiftCommand,
    NoteCommand,
    PersonaCommand,
)
from pallas.product.persona.config import RageConfig
from pallas.product.persona.notify import CHECK_KIND, NotifyDeps, check_notice, notify_owners
from pallas.product.persona.own_voice import (
    FINGERPRINT,
    FINGERPRINT_KIND,
    MoodForm,
    OwnVoice,
    VoiceHabits,
    learn_fingerprint,
)
from pallas.product.persona.relations import RelationsSource, Warmth
from pallas.product.persona.watch import NOTIFY_KIND, PersonaWatch, RageSilence, WatchDeps
from pallas.store.bot_voice import BotVoiceStore, StoredPersona
from pallas.store.ledger import LedgerWriter
from pallas.store.outbox import OutboxStore
from pallas.store.persona import PersonaStore


@dataclass
class PersonaHost:
    """What the persona feature plugs into."""

    engine: AsyncEngine
    write_lock: asyncio.Lock
    store: PersonaStore
    ledger: LedgerWriter
    jobs: Jobs
    stages: StageList
    silence: SilenceStage
    commands: CommandStage
    observers: TurnObservers
    sources: list[ContextSource]
    sender: Sender
    outbox: OutboxStore
    owners: tuple[str, ...]
    names: tuple[str, ...]
    smtp: SmtpConfig
    action_ids: Callable[[], int]
    clock: Callable[[], datetime]
    voice: BotVoiceStore
    seed: Persona
    personas: list[PersonaSource]
    reply_forms: list[ReplyForm]


def install_persona(host: PersonaHost, config: RageConfig) -> None:
    _own_voice(host)
    host.sources.append(RelationsSource(host.store))
    host.observers.register(Warmth(host.engine, host.store, host.clock))
    for command in (LiftCommand, BlacklistCommand, FavorCommand, NoteCommand):
        host.commands.register(command(host.engine, host.store, host.clock))
    host.silence.add(RageSilence(host.store))  # lifting still works with rage switched off
    if not config.enabled:
        return
    _notices(host, config)
    watch = WatchDeps(
        engine=host.engine,
        store=host.store,
        ledger=host.ledger,
        jobs=host.jobs,
        owners=frozenset(host.owners),
        names=host.names,
        clock=host.clock,
        policy=config.policy(),
    )
    host.stages.register(PersonaWatch(watch))


def _own_voice(host: PersonaHost) -> None:
    host.personas.append(OwnVoice(host.voice, host.seed, host.clock, random.Random))
    host.sources.append(VoiceHabits(host.voice))
    learn = partial(learn_fingerprint, engine=host.engine, store=host.voice, clock=host.clock)
    host.jobs.handle(FINGERPRINT_KIND, learn)
    host.jobs.every(FINGERPRINT)
    host.reply_forms.insert(0, MoodForm(host.voice))  # before the forms that change the reply
    seed = StoredPersona(host.seed.name, host.seed.description, host.seed.style)
    host.commands.register(PersonaCommand(host.voice, seed, host.clock))


def _notices(host: PersonaHost, config: RageConfig) -> None:
    deps = NotifyDeps(
        engine=host.engine,
        write_lock=host.write_lock,
        sender=host.sender,
        outbox=host.outbox,
        jobs=host.jobs,
        owners=host.owners,
        smtp=host.smtp,
        action_ids=host.action_ids,
        clock=host.clock,
        check_after_s=config.notify_check_s,
    )
    host.jobs.handle(NOTIFY_KIND, partial(notify_owners, deps=deps))
    host.jobs.handle(CHECK_KIND, partial(check_notice, deps=deps))
