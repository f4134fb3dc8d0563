"""Plugging the bot's feelings and plans into the core: the persona stage (attacks, rage,
observed notes), the rage silence policy, the owners' notice jobs, warmth after turns, the
relations context source, the intent listeners (mood, promises, the model's judgment of
attacks), the private follow-up and promise jobs (turns of the bot's own) and the owner's
commands (docs/persona.md)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import partial

from pallas.platform.smtp import SmtpConfig
from pallas.product.extensions import CoreServices, Extension, Plugs
from pallas.product.llm.agent.agent_factory import StoredCharacterSource, seed_character
from pallas.product.llm.assembler.context import Character
from pallas.product.persona.commands import (
    BlacklistCommand,
    FavorCommand,
    LiftCommand,
    NoteCommand,
    PromiseCommand,
)
from pallas.product.persona.config import FollowUpConfig, PersonaKeys, PromiseConfig, RageConfig
from pallas.product.persona.console import persona_actions, persona_facet, persona_routes
from pallas.product.persona.extracted_notes import RelationNoteTool
from pallas.product.persona.follow_up import (
    FOLLOW_UP_KIND,
    FollowUpArm,
    FollowUpDeps,
    run_follow_up,
)
from pallas.product.persona.notify import CHECK_KIND, NotifyDeps, check_notice, notify_owners
from pallas.product.persona.offence import OffenceLines, OffenceListener
from pallas.product.persona.own_style import (
    FINGERPRINT,
    FINGERPRINT_KIND,
    MoodListener,
    OwnStyle,
    StateLines,
    StyleHabits,
    learn_fingerprint,
)
from pallas.product.persona.promise_store import PromiseStore
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
from pallas.product.persona.settings import PersonaKnobs, persona_sections
from pallas.product.persona.store import PersonaStore
from pallas.product.persona.style_store import BotStyleStore
from pallas.product.persona.watch import NOTIFY_KIND, PersonaWatch, RageSilence, WatchDeps
from pallas.product.settings.applied import Live


@dataclass
class _Persona:
    """What persona's parts are built from: the core's ports and persona's own stores."""

    plugs: Plugs
    core: CoreServices
    store: PersonaStore
    style: BotStyleStore
    promises: PromiseStore
    seed: Character
    owners: tuple[str, ...]


def persona_extension(configs: PersonaKeys | None = None) -> Extension:
    """Persona as a feature; `configs` stand in for the agent file's `rage:`, `follow_up:`
    and `promises:` (tests)."""
    return Extension(
        name="persona",
        install=partial(install_persona, configs=configs),
        summary="被骂会生气、和群友的亲疏、称呼备注、自己的说话风格、私聊后的回访、答应主人的事",
        config=PersonaKeys,
    )


def install_persona(plugs: Plugs, configs: PersonaKeys | None = None) -> None:
    """Everything is installed whatever the switches say: the console turns rage, the
    follow-up and promises on and off while the bot runs, and each part reads its section
    (a `Live` reader) where it acts."""
    core = plugs.core
    agent = core.agent_config
    configs = configs or plugs.config
    host = _Persona(
        plugs, core, PersonaStore(core.engine),
        BotStyleStore(core.engine), PromiseStore(core.engine),
        seed_character(agent, core.bot_names), tuple(core.settings.superusers),
    )  # fmt: skip
    plugs.add_context_source(RelationsSource(host.store))
    plugs.add_extraction_tool(RelationNoteTool(core.engine, host.store))
    plugs.add_observer(Warmth(core.engine, host.store, core.clock))
    for command in (LiftCommand, BlacklistCommand, FavorCommand, NoteCommand):
        plugs.add_command(command(core.engine, host.store, core.clock))
    plugs.add_silence_policy(RageSilence(host.store))  # lifting still works with rage off
    _console(host)
    knobs = PersonaKnobs(Live(configs.rage), Live(configs.follow_up), Live(configs.promises))
    for section in persona_sections(core.settings_table, knobs):
        plugs.add_section(section)
    promises = _promises(host, knobs.promises)
    _follow_up(host, knobs.follow_up)
    _rage(host, knobs.rage)
    judging = OffenceLines(frozenset(host.owners), lambda: knobs.rage().judging)
    _own_style(host, [PromiseLines(promises), judging])


def _console(host: _Persona) -> None:
    store, clock = host.store, host.core.clock
    host.plugs.add_api_routes(persona_routes(store, host.promises, clock))
    host.plugs.add_person_facet(persona_facet(host.core.engine, store))

    for name, action in persona_actions(host.core.engine, store).items():
        host.plugs.add_person_action(name, action)


def _rage(host: _Persona, config: Live[RageConfig]) -> None:
    """Attacks noticed: the persona stage, the owners' notice; the model's judgment too."""
    _notices(host, config)
    watch = WatchDeps(
        engine=host.core.engine,
        store=host.store,
        ledger=host.core.ledger,
        jobs=host.core.jobs,
        owners=frozenset(host.owners),
        names=host.core.bot_names,
        clock=host.core.clock,
        rage=config,
    )
    host.plugs.add_stage(PersonaWatch(watch))
    host.plugs.add_intent_listener(OffenceListener(watch))


def _own_style(host: _Persona, more: list[StateLines]) -> None:
    stored = StoredCharacterSource(host.core.character, host.seed, host.core.clock)
    own = OwnStyle(host.style, stored, host.core.clock, random.Random, more)
    host.plugs.add_character_source(own)
    host.plugs.add_context_source(StyleHabits(host.style))
    learn = partial(
        learn_fingerprint, engine=host.core.engine, store=host.style, clock=host.core.clock
    )
    host.plugs.add_job(FINGERPRINT_KIND, learn)
    host.plugs.add_periodic_job(FINGERPRINT)
    host.plugs.add_intent_listener(MoodListener(host.style))


def _promises(host: _Persona, config: Live[PromiseConfig]) -> PromiseDeps:
    deps = PromiseDeps(
        store=host.promises,
        jobs=host.core.jobs,
        ledger=host.core.ledger,
        proactive=host.core.proactive,
        owners=frozenset(host.owners),
        config=config,
        clock=host.core.clock,
    )
    host.plugs.add_intent_listener(PromiseListener(deps))  # refuses every promise when switched off
    host.plugs.add_job(DUE_KIND, partial(run_promise_due, deps=deps))
    host.plugs.add_job(EXPIRE_KIND, partial(expire_promises, deps=deps))
    host.plugs.add_periodic_job(EXPIRE)
    host.plugs.add_command(PromiseCommand(host.promises, host.core.clock))
    return deps


def _follow_up(host: _Persona, config: Live[FollowUpConfig]) -> None:
    deps = FollowUpDeps(
        engine=host.core.engine,
        jobs=host.core.jobs,
        ledger=host.core.ledger,
        proactive=host.core.proactive,
        config=config,
        clock=host.core.clock,
        rng=random.Random,
    )
    host.plugs.add_observer(FollowUpArm(deps))  # arms nothing while switched off
    # Handled even when switched off: chances armed before end as `disabled`.
    host.plugs.add_job(FOLLOW_UP_KIND, partial(run_follow_up, deps=deps))


def _notices(host: _Persona, config: Live[RageConfig]) -> None:
    deps = NotifyDeps(
        engine=host.core.engine,
        sender=host.core.sender,
        outbox=host.core.outbox,
        jobs=host.core.jobs,
        owners=host.owners,
        smtp=SmtpConfig.from_settings(host.core.settings),
        action_ids=host.core.action_ids,
        clock=host.core.clock,
        check_after_s=lambda: config().notify_check_s,
    )
    host.plugs.add_job(NOTIFY_KIND, partial(notify_owners, deps=deps))
    host.plugs.add_job(CHECK_KIND, partial(check_notice, deps=deps))


EXTENSION = persona_extension()
