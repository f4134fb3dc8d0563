"""The feature seam: a feature is one folder exporting one `Extension`, which plugs into the
core through `Plugs` and nothing else (docs/architecture.md, "Adding a feature").

  EXTENSION = Extension(name="example", install=install, migrations=Migrations(folder, "ex_0001"))

  def install(plugs: Plugs) -> None:
      plugs.add_stage(MyStage(plugs.core), before="gate")
      plugs.add_command(MyCommand(...), Audience.MEMBER)
      plugs.add_job("example.work", handler)
      plugs.add_section(my_section(plugs.core.settings_table))
      plugs.add_lifespan(start, stop)

`Feature` is already the word for a per-group switch (product/settings/features.py); the
seam's object is an *extension*. Which extensions run is process-wide configuration:
PALLAS_FEATURES_OFF switches built-in ones off by name, PALLAS_FEATURE_MODULES adds others by
module path (docs/architecture.md). Every verb is `add_*`; nothing a feature registers is a
list it appends to itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from fastapi import APIRouter
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.config import ConfigError, Settings
from pallas.product.conversation.commands import Audience, Command, CommandStage
from pallas.product.conversation.delivery.contract import Sender
from pallas.product.conversation.delivery.dispatcher import (
    OutboxDispatcher,
    OutgoingCheck,
    ReceiptListener,
)
from pallas.product.conversation.gate.policy import GatePolicy
from pallas.product.conversation.jobs.periodic import PeriodicJob
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.conversation.jobs.worker import JobHandler
from pallas.product.conversation.retention import RetentionHolders
from pallas.product.conversation.silence import SilencePolicy, SilenceStage
from pallas.product.conversation.stages import Stage, StageList
from pallas.product.conversation.turns.observers import TurnObserver, TurnObservers
from pallas.product.conversation.turns.proactive import ProactiveTurns
from pallas.product.llm.agent.config import DEFAULT_AGENT_FILE, AgentConfig, AgentFile
from pallas.product.llm.agent.reply_forms import IntentListener, ReplyForm
from pallas.product.llm.assembler.context import CharacterSource, ContextSource, TurnPreparer
from pallas.product.llm.tools.base import Conversation, Tool, ToolSpec
from pallas.product.llm.tools.book import ToolBook
from pallas.product.llm.tools.extraction_tools import ExtractionTool
from pallas.product.llm.tools.registry import FunctionPlugin, ToolRegistry
from pallas.product.ports import (
    DoctorChecks,
    FactKeeper,
    Facts,
    OwnerPage,
    PersonAction,
    PersonFacet,
)
from pallas.product.settings.features import FeatureGate
from pallas.product.settings.registry import Section, SettingsRegistry
from pallas.providers.manager import ModelManager
from pallas.store.asset_store import AssetStore
from pallas.store.character import CharacterStore
from pallas.store.database import Database
from pallas.store.ledger import LedgerWriter
from pallas.store.migrate import Migrations
from pallas.store.outbox import OutboxStore
from pallas.store.retention import Holds
from pallas.store.settings_table import SettingsTable

Model = TypeVar("Model", bound=BaseModel)
Hook = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Extension:
    name: str  # snake_case; what PALLAS_FEATURES_OFF names
    install: Callable[[Plugs], None]
    summary: str = ""  # one line for the docs and the doctor
    migrations: Migrations | None = None
    # Its keys of config/agent.yml, as one pydantic model whose fields are the keys (read
    # once at start-up; `plugs.config` in `install`). Keys the core does not know are the
    # features'; a key no model declares stops start-up naming it.
    config: type[BaseModel] | None = None
    # Its lines of `python -m pallas doctor`, given the settings (MCP: which servers start).
    checks: DoctorChecks | None = None


@dataclass(frozen=True)
class CoreServices:
    """What a feature may use of the core (its ports): the store, the one way out, the
    audit trail, the clock, and the settings it reads."""

    engine: AsyncEngine
    database: Database  # the engine and how to write to it (`database.write()`)
    ledger: LedgerWriter
    sender: Sender
    outbox: OutboxStore
    action_ids: Callable[[], int]
    clock: Callable[[], datetime]
    data_dir: Path
    names: Callable[[str, str], Awaitable[str | None]]  # a member's name on the platform
    features: FeatureGate
    settings_table: SettingsTable
    settings: Settings
    jobs: Jobs
    models: ModelManager
    agent_config: AgentConfig
    superusers: frozenset[str]
    assets: AssetStore  # pictures, stickers and voices by content hash
    # Facts about people handed over by other features (the sticker habit's favourites):
    # the memory feature keeps them, through `plugs.add_fact_keeper`.
    facts: Facts
    proactive: ProactiveTurns  # turns the bot starts itself (a follow-up, a promise due)
    bot_names: tuple[str, ...]  # NICKNAME: what calling the bot by name means
    character: CharacterStore  # who each bot account is (name, description, style)
    # A chat's gate policy as it is now (its quiet hours, its mute): what a feature that
    # speaks on its own schedule respects.
    gate_policy: Callable[[int, datetime], Awaitable[GatePolicy]]


@dataclass(frozen=True)
class Targets:
    """The core's registries the verbs reach (each with its own verb and checks)."""

    stages: StageList
    commands: CommandStage
    jobs: Jobs
    registry: SettingsRegistry
    observers: TurnObservers
    tools: ToolRegistry
    retention: RetentionHolders
    dispatcher: OutboxDispatcher
    silence: SilenceStage


@dataclass(frozen=True)
class Plugged:
    """What the features plugged that the core reads after install: the agent every turn,
    the console on its pages. Frozen once every feature is installed."""

    context_sources: tuple[ContextSource, ...] = ()
    preparers: tuple[TurnPreparer, ...] = ()
    reply_forms: tuple[ReplyForm, ...] = ()
    characters: tuple[CharacterSource, ...] = ()
    listeners: tuple[IntentListener, ...] = ()
    extraction_tools: tuple[ExtractionTool, ...] = ()
    api_routes: tuple[APIRouter, ...] = ()
    person_facets: tuple[PersonFacet, ...] = ()
    person_actions: tuple[tuple[str, PersonAction], ...] = ()
    owner_pages: tuple[OwnerPage, ...] = ()


class _Collected:
    """The seam's own collections while features install; nobody outside appends to them."""

    def __init__(self) -> None:
        self._items: dict[str, list[Any]] = {name: [] for name in Plugged.__dataclass_fields__}
        self.hooks: list[tuple[str, Hook, Hook]] = []

    def add(self, kind: str, item: object) -> None:
        self._items[kind].append(item)

    def now(self, kind: str) -> tuple[Any, ...]:
        return tuple(self._items[kind])

    def freeze(self) -> Plugged:
        return Plugged(**{kind: tuple(items) for kind, items in self._items.items()})


@dataclass
class Plugs:
    """The one registry a feature's `install` is given."""

    core: CoreServices
    _targets: Targets
    _collected: _Collected = field(default_factory=_Collected)
    config: Any = None  # the extension's own `config` model, read from config/agent.yml

    def add_stage(self, stage: Stage, *, before: str | None = None) -> None:
        """A stage in the core's order; a feature's own stage names the one it precedes."""
        self._targets.stages.register(stage, before=before)

    def add_command(
        self, command: Command, audience: Audience = Audience.OWNER, aliases: Sequence[str] = ()
    ) -> None:
        self._targets.commands.register(command, audience, aliases)

    def add_job(self, kind: str, handler: JobHandler, *, timeout_s: float | None = None) -> None:
        self._targets.jobs.handle(kind, handler, timeout_s=timeout_s)

    def add_periodic_job(self, job: PeriodicJob) -> None:
        self._targets.jobs.every(job)

    def add_section(self, section: Section) -> None:
        self._targets.registry.register(section)

    def add_observer(self, observer: TurnObserver) -> None:
        """Told after each turn, off the turn's path (enqueue durable work there)."""
        self._targets.observers.register(observer)

    def add_context_source(self, source: ContextSource) -> None:
        """A block of a turn's context, read every turn (no model calls)."""
        self._collected.add("context_sources", source)

    def add_tool_plugin(self, plugin: FunctionPlugin) -> None:
        """Model tools, offered in turns (switchable on the console's tools page)."""
        self._targets.tools.register_plugin(plugin)

    def add_preparer(self, preparer: TurnPreparer) -> None:
        """Work on a turn's own messages before its context is read (pictures, voices)."""
        self._collected.add("preparers", preparer)

    def add_reply_form(self, form: ReplyForm) -> None:
        """A form a decided reply may take on its way out (a sticker, a voice)."""
        self._collected.add("reply_forms", form)

    def add_receipt_listener(self, listener: ReceiptListener) -> None:
        """Told of each outbox row once it is known sent (a sticker's uses)."""
        self._targets.dispatcher.on_receipt(listener)

    def add_outgoing_check(self, check: OutgoingCheck) -> None:
        """Check every message before it leaves, after the built-in screen: refuse it or
        rewrite it, naming the rule (audited as outgoing_blocked / outgoing_rewritten)."""
        self._targets.dispatcher.add_check(check)

    def add_silence_policy(self, policy: SilencePolicy) -> None:
        """Who the silence stage keeps quiet about (stored, flagged, nothing else sees it)."""
        self._targets.silence.add(policy)

    def add_character_source(self, source: CharacterSource) -> None:
        """Who the bot is in a turn, when the feature keeps it per account."""
        self._collected.add("characters", source)

    def add_intent_listener(self, listener: IntentListener) -> None:
        """Hears a decided reply's or silence's declared intents (mood, promises, offence)."""
        self._collected.add("listeners", listener)

    def add_extraction_tool(self, tool: ExtractionTool) -> None:
        """A tool of memory's after-turn extraction call (persona's relation notes)."""
        self._collected.add("extraction_tools", tool)

    def extraction_tools(self) -> tuple[ExtractionTool, ...]:
        """The extraction tools every feature offers: a reader, for the extraction call to
        ask when it runs (features installed later add theirs)."""
        return self._collected.now("extraction_tools")

    def add_fact_keeper(self, keeper: FactKeeper) -> None:
        """Keep the facts other features hand over (`core.facts`); one feature keeps them."""
        self.core.facts.kept_by(keeper)

    def add_api_routes(self, router: APIRouter) -> None:
        """Console API routes under /pallas/api, behind the console's token (docs/console.md)."""
        self._collected.add("api_routes", router)

    def add_person_facet(self, facet: PersonFacet) -> None:
        """The feature's keys of a person's page on the console (what it keeps about them)."""
        self._collected.add("person_facets", facet)

    def add_owner_page(self, page: OwnerPage) -> None:
        """A page of the feature's own in the console's menu (a script over its API routes)."""
        if any(taken.key == page.key for taken in self._collected.now("owner_pages")):
            raise ValueError(f"a console page {page.key!r} is already plugged")
        self._collected.add("owner_pages", page)

    def add_person_action(self, name: str, action: PersonAction) -> None:
        """An edit the owner makes on a person's page: the form posts its fields to
        /pallas/persons/{person}/{name}, and the action checks them against the person."""
        if any(taken == name for taken, _ in self._collected.now("person_actions")):
            raise ValueError(f"person action {name!r} plugged twice")
        self._collected.add("person_actions", (name, action))

    def add_retention_hold(self, name: str, holds: Callable[[], Awaitable[Holds]]) -> None:
        """Rows the feature still needs, which the hourly clean-up keeps (docs/retention.md)."""
        self._targets.retention.hold(name, holds)

    def add_lifespan(self, start: Hook, stop: Hook, *, name: str = "") -> None:
        """Run `start` once the core is up; `stop` before it goes down (last in, first out)."""
        self._collected.hooks.append((name, start, stop))

    def settings_of(
        self, section: Section, model: type[Model]
    ) -> Callable[[str], Awaitable[Model]]:
        """A reader of the section's current values for a scope: a running part asks it
        where it acts, so a change from the console reaches it with nothing set on it."""
        registry = self._targets.registry

        async def current(scope_id: str) -> Model:
            read = await registry.read(section.key, scope_id)
            return model(**read.values())

        return current

    def tools_as_offered(
        self, names: Sequence[str]
    ) -> Callable[[Conversation], Awaitable[list[tuple[Tool, ToolSpec]]]]:
        """The registry's tools of these names that a turn in the conversation could use now,
        each with its spec as the owner edited it: a feature that runs tools off the turn (a
        research task) keeps the owner's switches on the 工具 page."""
        book = ToolBook(self._targets.tools, self.core.engine, frozenset())

        async def usable(conversation: Conversation) -> list[tuple[Tool, ToolSpec]]:
            snapshot = await book.snapshot()
            found = []
            for tool in filter(None, map(book.registry.get, names)):
                candidate = book.candidate(tool, snapshot, conversation)
                if candidate.availability.available:
                    found.append((tool, candidate.spec))
            return found

        return usable

    def reload_tool_plugin(self, plugin: FunctionPlugin) -> None:
        """Add or replace a plugin of tools while the bot runs (an MCP server's tool list,
        known only once it is up, and changed when it says so)."""
        self._targets.tools.reload_plugin(plugin)

    def settings_writer(
        self, section: Section
    ) -> Callable[[str, Mapping[str, Any]], Awaitable[None]]:
        """A writer of the section's values for a scope (a chat command's switch): checked
        and kept with what it replaced, as the console's changes are."""
        registry = self._targets.registry
        clock = self.core.clock

        async def change(scope_id: str, changes: Mapping[str, Any]) -> None:
            await registry.update(section.key, scope_id, changes, clock())

        return change


class Lifespans:
    """The features' start/stop pairs on one AsyncExitStack."""

    def __init__(self, hooks: Iterable[tuple[str, Hook, Hook]]) -> None:
        self._hooks = list(hooks)
        self._stack = AsyncExitStack()

    async def start(self) -> None:
        for _, start, stop in self._hooks:
            await start()
            self._stack.push_async_callback(stop)

    async def stop(self) -> None:
        await self._stack.aclose()


@dataclass(frozen=True)
class Installed:
    names: tuple[str, ...]
    migrations: tuple[Migrations, ...]
    lifespans: Lifespans
    plugged: Plugged


def load_extension(path: str) -> Extension:
    """`EXTENSION` of the module at `path` (PALLAS_FEATURE_MODULES)."""
    try:
        module = importlib.import_module(path)
    except ImportError as exc:
        raise ConfigError(f"PALLAS_FEATURE_MODULES: cannot import {path} ({exc})") from None
    found = getattr(module, "EXTENSION", None)
    if not isinstance(found, Extension):
        raise ConfigError(f"PALLAS_FEATURE_MODULES: {path} exports no EXTENSION")
    return found


def config_models(*groups: Sequence[Extension]) -> tuple[type[BaseModel], ...]:
    """The config models of these extensions: their keys of the agent file."""
    return tuple(e.config for group in groups for e in group if e.config is not None)


def enabled(built_in: Sequence[Extension], settings: Settings) -> list[Extension]:
    """The built-in extensions not switched off, then the configured modules'."""
    off = set(settings.pallas_features_off)
    unknown = off - {e.name for e in built_in}
    if unknown:
        known = ", ".join(e.name for e in built_in)
        raise ConfigError(f"PALLAS_FEATURES_OFF: no feature {sorted(unknown)} (there are {known})")
    chosen = [e for e in built_in if e.name not in off]
    chosen += [load_extension(path) for path in settings.pallas_feature_modules]
    names = [e.name for e in chosen]
    if len(set(names)) != len(names):
        raise ConfigError(f"PALLAS_FEATURE_MODULES: a feature is installed twice ({names})")
    return chosen


def install_all(
    extensions: Sequence[Extension],
    core: CoreServices,
    targets: Targets,
    built_in: Sequence[Extension] = (),
    agent_file: AgentFile | None = None,
) -> Installed:
    """Install each extension, with its part of the agent file; the schema kept up to date
    is every built-in feature's, on or off (a switched-off feature's tables wait for it, and
    its revision stays known), and every installed one's."""
    plugs = Plugs(core, targets)
    for extension in extensions:
        own = None
        if extension.config is not None:
            own = (agent_file or AgentFile({}, DEFAULT_AGENT_FILE)).part(extension.config)
        extension.install(replace(plugs, config=own))
    schema = {e.name: e.migrations for e in (*built_in, *extensions) if e.migrations is not None}
    return Installed(
        names=tuple(e.name for e in extensions),
        migrations=tuple(schema.values()),
        lifespans=Lifespans(plugs._collected.hooks),
        plugged=plugs._collected.freeze(),
    )
