"""Plugging the bot's feelings and plans into the core: the persona stage (attacks, rage,
observed notes), the rage silence policy, the owners' notice jobs, warmth after turns, the
relations context source, the intent listeners (mood, promises, the model's judgment of
attacks), the private follow-up and promise jobs (turns of the bot's own) and the owner's
commands (docs/persona.md)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field
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
from pallas.product.conversation.turns.proactive import ProactiveTurns
from pallas.product.llm.agent.reply_forms import IntentListener
from pallas.product.llm.assembler.context import ContextSource, Persona, PersonaSource
from pallas.product.llm.tools.extraction_tools import ExtractionTool
from pallas.product.persona.commands import (
    BlacklistCommand,
    FavorCommand,
    LiftCommand,
    NoteCommand,
    PersonaCommand,
    PromiseCommand,
)
from pallas.product.persona.config import FollowUpConfig, PromiseConfig, RageConfig
from pallas.product.persona.extracted_notes import RelationNoteTool
from pallas.product.persona.follow_up import (
    FOLLOW_UP_KIND,
    FollowUpArm,
    FollowUpDeps,
    run_follow_up,
)
from pallas.product.persona.notify import CHECK_KIND, NotifyDeps, check_notice, notify_owners
from pallas.product.persona.offence import OffenceLines, OffenceListener
from pallas.product.persona.own_voice import (
    FINGERPRINT,
    FINGERPRINT_KIND,
    MoodListener,
    OwnVoice,
    StateLines,
    VoiceHabits,
    learn_fingerprint,
)
from pallas.product.persona.promises import (
    DUE_KIND,
    EXPIRE,
    EXPIRE_KIND,
    PromiseDeps,
    PromiseLines,
    PromiseListener,
    expire_promises,
    run_promise_due,
)
from pallas.product.persona.relations import RelationsSource, Warmth
from pallas.product.persona.settings import PersonaKnobs, register_persona_sections
from pallas.product.persona.watch import NOTIFY_KIND, PersonaWatch, RageSilence, WatchDeps
from pallas.product.settings.registry import SettingsRegistry
from pallas.store.bot_voice import BotVoiceStore, StoredPersona
from pallas.store.ledger import LedgerWriter
from pallas.store.outbox import OutboxStore
from pallas.store.persona import PersonaStore
from pallas.store.plans import PromiseStore
from pallas.store.settings_table import SettingsTable


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
    listeners: list[IntentListener]
    proactive: ProactiveTurns
    promises: PromiseStore
    extraction_tools: list[ExtractionTool]
    settings: SettingsRegistry  # where the persona's knobs are registered for the console
    settings_table: SettingsTable


@dataclass(frozen=True)
class PersonaConfigs:
    rage: RageConfig = field(default_factory=RageConfig)
    follow_up: FollowUpConfig = field(default_factory=FollowUpConfig)
    promises: PromiseConfig = field(default_factory=PromiseConfig)


def install_persona(host: PersonaHost, configs: PersonaConfigs) -> None:
    """Everything is installed whatever the switches say: the console turns rage, the
    follow-up and promises on and off while the bot runs, and each asks its switch where
    it acts."""
    host.sources.append(RelationsSource(host.store))
    host.extraction_tools.append(RelationNoteTool(host.engine, host.store))
    host.observers.register(Warmth(host.engine, host.store, host.clock))
    for command in (LiftCommand, BlacklistCommand, FavorCommand, NoteCommand):
        host.commands.register(command(host.engine, host.store, host.clock))
    host.silence.add(RageSilence(host.store))  # lifting still works with rage switched off
    promises = _promises(host, configs.promises)
    follow_up = _follow_up(host, configs.follow_up)
    watch, notify = _rage(host, configs.rage)
    judging = OffenceLines(frozenset(host.owners), lambda: watch.enabled and watch.judging)
    _own_voice(host, [PromiseLines(promises), judging])
    knobs = PersonaKnobs(
        rage=partial(_use_rage, watch=watch, notify=notify),
        follow_up=partial(setattr, follow_up, "config"),
        promises=partial(setattr, promises, "config"),
    )
    bases = (configs.rage, configs.follow_up, configs.promises)
    register_persona_sections(host.settings, host.settings_table, bases, knobs)


def _use_rage(config: RageConfig, *, watch: WatchDeps, notify: NotifyDeps) -> None:
    watch.policy = config.policy()
    watch.enabled, watch.judging = config.enabled, config.model_judgement
    notify.check_after_s = config.notify_check_s


def _rage(host: PersonaHost, config: RageConfig) -> tuple[WatchDeps, NotifyDeps]:
    """Attacks noticed: the persona stage, the owners' notice; the model's judgment too."""
    notify = _notices(host, config)
    watch = WatchDeps(
        engine=host.engine,
        store=host.store,
        ledger=host.ledger,
        jobs=host.jobs,
        owners=frozenset(host.owners),
        names=host.names,
        clock=host.clock,
        policy=config.policy(),
        enabled=config.enabled,
        judging=config.model_judgement,
    )
    host.stages.register(PersonaWatch(watch))
    host.listeners.append(OffenceListener(watch))
    return watch, notify


def _own_voice(host: PersonaHost, more: list[StateLines]) -> None:
    host.personas.append(OwnVoice(host.voice, host.seed, host.clock, random.Random, more))
    host.sources.append(VoiceHabits(host.voice))
    learn = partial(learn_fingerprint, engine=host.engine, store=host.voice, clock=host.clock)
    host.jobs.handle(FINGERPRINT_KIND, learn)
    host.jobs.every(FINGERPRINT)
    host.listeners.append(MoodListener(host.voice))
    seed = StoredPersona(host.seed.name, host.seed.description, host.seed.style)
    host.commands.register(PersonaCommand(host.voice, seed, host.clock))


def _promises(host: PersonaHost, config: PromiseConfig) -> PromiseDeps:
    deps = PromiseDeps(
        store=host.promises,
        jobs=host.jobs,
        ledger=host.ledger,
        proactive=host.proactive,
        owners=frozenset(host.owners),
        config=config,
        clock=host.clock,
    )
    host.listeners.append(PromiseListener(deps))  # refuses every promise when switched off
    host.jobs.handle(DUE_KIND, partial(run_promise_due, deps=deps))
    host.jobs.handle(EXPIRE_KIND, partial(expire_promises, deps=deps))
    host.jobs.every(EXPIRE)
    host.commands.register(PromiseCommand(host.promises, host.clock))
    return deps


def _follow_up(host: PersonaHost, config: FollowUpConfig) -> FollowUpDeps:
    deps = FollowUpDeps(
        engine=host.engine,
        jobs=host.jobs,
        ledger=host.ledger,
        proactive=host.proactive,
        config=config,
        clock=host.clock,
        rng=random.Random,
    )
    host.observers.register(FollowUpArm(deps))  # arms nothing while switched off
    # Handled even when switched off: chances armed before end as `disabled`.
    host.jobs.handle(FOLLOW_UP_KIND, partial(run_follow_up, deps=deps))
    return deps


def _notices(host: PersonaHost, config: RageConfig) -> NotifyDeps:
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
    return deps
