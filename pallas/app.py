"""The object graph, built once at start-up.

settings -> store -> timeline writer -> ingress -> stage list (STAGE_ORDER) -> turn buffers
  -> turn runner -> after-turn observers
store -> outbox (the one way out) -> dispatcher -> OneBot outlet
store -> jobs (handlers and periodic jobs registered by features) -> job worker
settings -> model catalog -> model manager (usage rows to the store, traffic to the call log)
turn runner -> agent (context, decision, delivery through the OneBot outlet)
"""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from functools import partial
from pathlib import Path

import nonebot
from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.config import Settings
from pallas.console.token import ensure_console_token
from pallas.core.assets import ASSETS_FOLDER
from pallas.core.clock import shift_clock, utc_now
from pallas.features import BUILT_IN_FEATURES
from pallas.platform.onebot.lookups import PlatformLookups
from pallas.platform.onebot.outlet import OneBotOutlet
from pallas.platform.routed_outlet import RoutedOutlet
from pallas.platform.sandbox import SandboxHub, SandboxOutlet
from pallas.product.chat_commands.budget import BudgetCommand
from pallas.product.chat_commands.character import CharacterCommand
from pallas.product.chat_commands.commands import ChatCommandDeps, install_chat_commands
from pallas.product.conversation.accounts.book import AccountBook, AccountRules
from pallas.product.conversation.accounts.routing import AccountRouting
from pallas.product.conversation.commands import Audience, CommandStage, Syntax
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery, OutboxDispatcher
from pallas.product.conversation.delivery.pacing import DeliveryPolicy
from pallas.product.conversation.delivery.payload import asset_checker
from pallas.product.conversation.delivery.safety import OutgoingScreen, load_words
from pallas.product.conversation.gate.activity_book import ActivityBook
from pallas.product.conversation.gate.admission import Admission, AdmissionDeps
from pallas.product.conversation.gate.policy import GatePolicy
from pallas.product.conversation.gate.policy_book import PolicyBook
from pallas.product.conversation.gate.trigger import LOTTERY_SEED
from pallas.product.conversation.ingress import Ingress
from pallas.product.conversation.jobs.registry import Jobs, holder_prefix
from pallas.product.conversation.processes.lease import NameInUse, ProcessLease, default_name
from pallas.product.conversation.processes.takeover import SharedChats, Takeover
from pallas.product.conversation.retention import RetentionHolders, RetentionPolicy
from pallas.product.conversation.silence import BlockedUsers, SilenceStage
from pallas.product.conversation.stages import StageList
from pallas.product.conversation.turns.buffers import TurnBuffers
from pallas.product.conversation.turns.proactive import ProactiveTurns
from pallas.product.conversation.turns.recovery import (
    RecoveryDeps,
    RecoveryReport,
    recover_kernel,
)
from pallas.product.conversation.turns.runner import BLOCK_SIZE, RunnerDeps, TurnIds, run_turn
from pallas.product.conversation.turns.turn import NoTurnHandler, TurnHandler
from pallas.product.conversation.why import WhyCommand
from pallas.product.extensions import (
    CoreServices,
    Extension,
    Installed,
    Plugged,
    Targets,
    config_models,
    install_all,
)
from pallas.product.llm.agent.agent_factory import build_agent_handler, stored_seed
from pallas.product.llm.agent.config import AgentConfig, AgentFile
from pallas.product.llm.tools.toolset import ToolSetup, build_tools
from pallas.product.ports import Facts
from pallas.product.settings.applied import Live
from pallas.product.settings.core_sections import (
    CoreSectionParts,
    core_registry,
)
from pallas.product.settings.delivery_section import LivePacing
from pallas.product.settings.features import FeatureGate
from pallas.product.settings.outgoing_section import OutgoingSafety, link_rule_of
from pallas.product.settings.registry import SettingsRegistry
from pallas.product.settings.retention_section import RetentionParts, install_retention
from pallas.product.spending import tell_owners
from pallas.providers.budget import BudgetLimits, DailyBudget, Spend
from pallas.providers.call_log import CallLog
from pallas.providers.catalog import Catalog, ModelType
from pallas.providers.manager import ManagerDeps, ModelManager
from pallas.providers.providers_file import load_catalog
from pallas.store import kernel_state
from pallas.store.asset_store import AssetStore
from pallas.store.character import CharacterStore
from pallas.store.database import Database
from pallas.store.engine import backend_name, create_engine
from pallas.store.failures import classify, explain, short_detail
from pallas.store.jobs import JobStore
from pallas.store.ledger import LedgerWriter
from pallas.store.llm_usage import LlmUsageWriter, spent_by_part, spent_since
from pallas.store.members import temp_chat_group
from pallas.store.migrate import upgrade_to_head
from pallas.store.outbox import OutboxStore
from pallas.store.processes import ChatTurns, IdBlocks, Owners, Processes, ProcessStore
from pallas.store.retention import RetentionStore
from pallas.store.settings_table import SettingsTable
from pallas.store.timeline import TimelineWriter

# What happens to a committed message, in this order (docs/architecture.md, "The stage
# list"): silence, then persona (attacks on the bot, rage), then the owner's commands, then
# the deterministic responders, then media (asks for the pictures to be kept, never waits),
# then the gate, which hands what it admits to the turn buffers.
STAGE_ORDER = (
    "silence",
    "persona",
    "commands",
    "poke_back",
    "notices",
    "repeat",
    "media",
    "gate",
)


@dataclass(frozen=True)
class KernelConfig:
    gate: GatePolicy = field(default_factory=GatePolicy)
    delivery: DeliveryPolicy = field(default_factory=DeliveryPolicy)
    # Admitted messages younger than this that no turn consumed are re-buffered at start-up.
    rebuffer_window: timedelta = timedelta(minutes=2)


@dataclass
class Recorders:
    """What records as the bot runs, each committing in its own batches: the timeline, the
    audit ledger, the model-call rows, and the model-call log (files, not the store)."""

    timeline: TimelineWriter
    ledger: LedgerWriter
    usage: LlmUsageWriter
    call_log: CallLog

    def start(self, *, log_calls: bool) -> None:
        self.timeline.start()
        self.ledger.start()
        self.usage.start()
        if log_calls:
            self.call_log.open()

    async def close(self) -> None:
        await self.timeline.close()
        await self.ledger.close()
        await self.usage.close()
        self.call_log.close()


@dataclass
class Conversation:
    """From a stored message to a turn: the ingress, the stage list, the turn buffers, the
    runner that hands a turn to its handler, and each group's gate policy."""

    ingress: Ingress
    stages: StageList
    turn_buffers: TurnBuffers
    runner: RunnerDeps
    policies: PolicyBook
    rebuffer_window: timedelta


@dataclass
class Delivery:
    """The one way out (docs/delivery.md): the outbox rows, the dispatcher sending them in
    order, and what every part hands its words to."""

    outbox: OutboxStore
    dispatcher: OutboxDispatcher
    sender: OutboxDelivery
    pacing: LivePacing  # what the dispatcher reads at every send (the `delivery` section)
    safety: Live[OutgoingSafety]  # the link rule the screen reads (the `outgoing` section)
    accounts: AccountBook  # which account answers and speaks in a group (docs/accounts.md)


@dataclass
class Runtime:
    settings: Settings
    database: Database  # the engine and the rule for writing (pallas/store/database.py)
    recorders: Recorders
    conversation: Conversation
    delivery: Delivery
    jobs: Jobs
    models: ModelManager
    tools: ToolSetup
    settings_registry: SettingsRegistry  # every behaviour knob, stored (docs/console.md)
    extensions: Installed  # the features that run: what they plugged, tables, start/stop
    outlet: RoutedOutlet  # NapCat's chats and the console's sandbox
    lookups: PlatformLookups  # forward content and unknown members, off the ingress path
    lease: ProcessLease  # this process's on the store it may share (docs/scaling.md)
    console_token: str = field(default="", repr=False)

    @classmethod
    def build(
        cls,
        settings: Settings,
        kernel: KernelConfig | None = None,
        handler: TurnHandler | None = None,
        features: Sequence[Extension] = (),
    ) -> Runtime:
        """The core, with `features` installed through the seam (bot.py passes the enabled
        ones; a test passes what it exercises); `handler` stands in for the agent (tests)."""
        shift_clock(settings.pallas_clock_shift_s)  # before anything reads the clock
        kernel = kernel or KernelConfig()
        database = Database.of(create_engine(settings.database_url))
        recorders = _recorders(settings, database.engine)
        models = _model_manager(settings, recorders.usage, recorders.call_log, database.engine)
        conversation, silence = _conversation(settings, database.engine, recorders, kernel)
        outlet = _outlet(settings, database.engine, conversation.ingress)
        lease = _process_lease(settings, database.engine)
        delivery = _delivery(settings, database.engine, outlet, recorders.ledger, kernel, lease)
        _share(lease, database.engine, recorders, conversation)
        conversation.runner.queued_replies = delivery.outbox.waiting_messages
        conversation.ingress.plug_origins(delivery.dispatcher.in_flight.origin_of)
        conversation.ingress.plug_accounts(delivery.accounts)
        jobs = Jobs(JobStore(database.engine), utc_now)
        jobs.process = lease.name
        tools = build_tools(database.engine, settings.pallas_data_dir,
                            search_api_url=settings.web_search_api_url,
                            search_api_key=settings.tavily_api_key)  # fmt: skip
        agent_file = AgentFile.read()
        agent_config = agent_file.core(config_models(BUILT_IN_FEATURES, features))
        core = _core_services(settings, database, recorders, conversation, delivery, jobs,
                              models, agent_config, outlet)  # fmt: skip
        _tell_owners_of_the_budget(settings, core)
        commands = _commands(settings, core)
        conversation.stages.register(commands)
        registry = _registry(core, conversation, delivery, commands)
        targets = Targets(conversation.stages, commands, jobs, registry,
                          conversation.runner.observers, tools.book.registry,
                          _retention(settings, core, recorders, registry),
                          delivery.dispatcher, silence)  # fmt: skip
        extensions = install_all(features, core, targets, BUILT_IN_FEATURES, agent_file)
        # The agent acts with what the features plugged, so it is made last (tests bring
        # their own handler); the runner hands each turn to it.
        agent = handler or _agent(core, outlet, delivery, tools, extensions.plugged,
                                  registry.section("agent").current)  # fmt: skip
        conversation.runner.handler = agent
        return cls(settings, database, recorders, conversation, delivery, jobs, models, tools,
                   registry, extensions, outlet, PlatformLookups(conversation.ingress),
                   lease)  # fmt: skip

    @property
    def engine(self) -> AsyncEngine:
        return self.database.engine

    @property
    def database_backend(self) -> str:
        return backend_name(self.engine)

    @property
    def model_chat_enabled(self) -> bool:
        return self.models.has(ModelType.CHAT)

    async def start(self) -> None:
        data_dir = self.settings.pallas_data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        await self._migrate()
        self.recorders.start(log_calls=not self.models.catalog.empty)
        await self.tools.book.purge_essential_switches(utc_now())
        await self.settings_registry.restore()  # the model choice, the reply limits
        await self.delivery.accounts.load()
        await self._join()
        await self.delivery.dispatcher.recover()
        self.delivery.dispatcher.start()
        await self._recover_turns()
        self.conversation.turn_buffers.start()
        await self._watch_processes()
        await self.jobs.start()
        await self.extensions.lifespans.start()
        # Everything loaded so far lives for the whole run: keep it out of the collector's
        # full passes, which otherwise stall the event loop for tens of milliseconds.
        gc.collect()
        gc.freeze()
        self.console_token = ensure_console_token(self.settings.pallas_console_token, data_dir)
        logger.info("store ready: {} database", self.database_backend)
        _announce_model_chat(self.models.catalog)

    async def _migrate(self) -> None:
        try:
            # `python bot.py` has migrated already (pallas/store/preflight.py): this finds the
            # store at its head, unless something changed it in between.
            await upgrade_to_head(self.engine, self.extensions.migrations)
        except Exception as exc:
            url = self.engine.url.render_as_string(hide_password=False)
            logger.critical(explain(classify(exc, migrating=True), url, short_detail(exc)))
            raise

    async def _join(self) -> None:
        """Take this process's name on the store (docs/scaling.md)."""
        try:
            await self.lease.join(connected_accounts)
        except NameInUse as exc:
            logger.critical(str(exc))
            raise
        if not self.lease.alone:  # renewed from now: a long start-up must not lose it
            self.lease.on_lost = _stop_this_process
            self.lease.start()

    async def _recover_turns(self) -> None:
        self.conversation.runner.turn_ids = await _turn_ids(self.engine, self.lease.alone)
        await self._recover(self.lease.owners())

    async def _recover(self, owners: Owners) -> RecoveryReport:
        conversation = self.conversation
        return await recover_kernel(
            RecoveryDeps(
                engine=self.engine,
                ledger=self.recorders.ledger,
                turn_buffers=conversation.turn_buffers,
                gate=conversation.stages,
                window=conversation.rebuffer_window,
                clock=utc_now,
                owners=owners,
            )
        )

    async def _learn_accounts(self, view: Processes) -> None:
        self.delivery.accounts.refresh(view.connected_accounts())

    async def _release_jobs(self, process: str) -> int:
        return await self.jobs.store.release_running(utc_now(), holder_prefix(process))

    async def _watch_processes(self) -> None:
        """Sharing the store: renew the lease, take over dead processes' work."""
        if self.lease.alone:
            return
        takeover = Takeover(self.lease, self._recover, self._release_jobs, utc_now)
        await takeover.after_renewal(self.lease.view)  # a takeover the last run left, too
        self.lease.on_renewed.append(takeover.after_renewal)
        self.lease.on_renewed.append(self._learn_accounts)
        chats = self.conversation.turn_buffers.chats
        if isinstance(chats, SharedChats):
            self.lease.on_renewed.append(chats.retry_releases)

    async def stop(self) -> None:
        await self.extensions.lifespans.stop()
        await self.jobs.stop()
        await self.conversation.turn_buffers.stop()
        await self.conversation.runner.observers.drain()
        await self.delivery.dispatcher.stop()
        await self.models.close()
        await self.recorders.close()
        await self.lease.stop()
        await self.engine.dispose()


def _recorders(settings: Settings, engine: AsyncEngine) -> Recorders:
    return Recorders(
        TimelineWriter(engine),
        LedgerWriter(engine),
        LlmUsageWriter(engine),
        CallLog(settings.pallas_data_dir / "logs" / "llm", started_at=utc_now()),
    )


def _conversation(
    settings: Settings, engine: AsyncEngine, recorders: Recorders, kernel: KernelConfig
) -> tuple[Conversation, SilenceStage]:
    """Ingress -> the stage list (silence ... gate) -> turn buffers -> runner; the handler and
    the other stages come later (the agent, the commands, the features)."""
    activities, policies = ActivityBook(engine), PolicyBook(engine, kernel.gate)
    ledger = recorders.ledger
    runner = RunnerDeps(
        ledger=ledger,
        handler=NoTurnHandler(),  # until the agent is made, once the features are in
        turn_ids=TurnIds(0),
        activity=activities.get,
        policy=policies.get,
        clock=utc_now,
        lottery_seed=LOTTERY_SEED,
    )
    turn_buffers = TurnBuffers(partial(run_turn, deps=runner), ledger)
    admission = Admission(
        AdmissionDeps(
            engine=engine,
            ledger=ledger,
            turn_buffers=turn_buffers,
            activities=activities,
            policies=policies,
            # A name only one account answers to is a call too (docs/accounts.md).
            names=(*settings.nickname, *_account_rules(settings).all_names),
            clock=utc_now,
            lottery_seed=LOTTERY_SEED,
        )
    )
    silence = SilenceStage([BlockedUsers(settings.pallas_blocked_users)], utc_now)
    stages = StageList([silence, admission], recorders.ledger, admission, STAGE_ORDER)
    ingress = Ingress(recorders.timeline, stages)
    parts = Conversation(ingress, stages, turn_buffers, runner, policies, kernel.rebuffer_window)
    return parts, silence


def _outlet(settings: Settings, engine: AsyncEngine, ingress: Ingress) -> RoutedOutlet:
    """Where the bot's actions go: NapCat, or the console's sandbox for its own chats; the
    bot's own messages come back through the ingress."""
    assets = _assets_folder(settings)
    return RoutedOutlet(
        OneBotOutlet(ingress, route=partial(temp_chat_group, engine), assets=assets),
        SandboxOutlet(ingress, SandboxHub(), utc_now),
    )


OUTGOING_WORDS_FILE = Path("config/outgoing_words.txt")  # docs/delivery.md, "Outgoing safety"
RAISED_SECTION = "budget_today"  # an owner's caps for one day (/预算), by the day's date


def _process_lease(settings: Settings, engine: AsyncEngine) -> ProcessLease:
    name = settings.pallas_process_name or default_name(settings.port)
    lease = timedelta(seconds=settings.pallas_process_lease_s)
    alone = backend_name(engine) == "sqlite"  # its file lock refuses a second process
    return ProcessLease(ProcessStore(engine), name, lease, utc_now, alone=alone)


def _share(
    lease: ProcessLease, engine: AsyncEngine, recorders: Recorders, conversation: Conversation
) -> None:
    """On a shared store: name this process on what it claims, one turn per chat across
    processes (docs/scaling.md). Alone, everything is its own: nothing to name."""
    if lease.alone:
        return
    recorders.timeline.stored_by = lease.name
    conversation.runner.holder = lease.name
    conversation.runner.may_act = lease.confirm
    conversation.turn_buffers.chats = SharedChats(ChatTurns(engine, lease.name), lease, utc_now)


async def _turn_ids(engine: AsyncEngine, alone: bool) -> TurnIds:
    """Alone: on from the largest turn id stored. Shared: a block of the store's own."""
    last = await kernel_state.max_turn_id(engine)
    if alone:
        return TurnIds(last)
    blocks = IdBlocks(engine)

    async def take() -> range:
        return await blocks.take("turn", BLOCK_SIZE)

    block = await blocks.take("turn", BLOCK_SIZE, at_least=last)
    return TurnIds(block.start - 1, block[-1], take)


async def _stop_this_process() -> None:
    """The lease was taken over: stop as on Ctrl-C (a supervisor starts it again)."""
    os.kill(os.getpid(), signal.SIGTERM)


def connected_accounts() -> tuple[str, ...]:
    return tuple(nonebot.get_bots())


def _delivery(
    settings: Settings, engine: AsyncEngine, outlet: RoutedOutlet, ledger: LedgerWriter,
    kernel: KernelConfig, lease: ProcessLease,
) -> Delivery:  # fmt: skip
    holder = None if lease.alone else lease.name
    outbox, pacing = OutboxStore(engine, holder=holder), LivePacing(kernel.delivery)
    words = load_words(OUTGOING_WORDS_FILE)  # the owner's, beside the built-in lexicon
    safety = Live(OutgoingSafety())  # the console's link rule
    screen = OutgoingScreen(words, partial(link_rule_of, safety))
    async def is_connected(account: str) -> bool:  # here, or to another live process
        return await outlet.is_connected(account) or lease.connected_elsewhere(account)

    accounts = AccountBook(engine, is_connected, _account_rules(settings))
    dispatcher = OutboxDispatcher(outbox, outlet, ledger, pacing, utc_now, screen=screen,
                                  route=AccountRouting(accounts), lease=lease)  # fmt: skip
    checked = asset_checker(_assets_folder(settings))
    sender = OutboxDelivery(outbox, dispatcher, utc_now, checked, accounts.answering_account)
    return Delivery(outbox, dispatcher, sender, pacing, safety, accounts)


def _account_rules(settings: Settings) -> AccountRules:
    names = {account: tuple(names) for account, names in settings.pallas_account_names.items()}
    return AccountRules(names, settings.pallas_account_handover)


def _core_services(
    settings: Settings, database: Database, recorders: Recorders, conversation: Conversation,
    delivery: Delivery, jobs: Jobs, models: ModelManager, agent_config: AgentConfig,
    outlet: RoutedOutlet,
) -> CoreServices:  # fmt: skip
    """What a feature may use of the core (pallas/product/extensions.py)."""
    engine, runner = database.engine, conversation.runner
    table = SettingsTable(engine)
    return CoreServices(
        engine, database, recorders.ledger, delivery.sender, delivery.outbox, _ids(runner),
        utc_now, settings.pallas_data_dir, outlet.nickname, FeatureGate(table), table,
        settings, jobs, models, agent_config, frozenset(settings.superusers),
        AssetStore(engine, _assets_folder(settings)), Facts(),
        ProactiveTurns(engine, conversation.turn_buffers, runner, delivery.accounts.speaking_as),
        tuple(settings.nickname),
        CharacterStore(engine),
        conversation.policies.get,
    )  # fmt: skip


def _commands(settings: Settings, core: CoreServices) -> CommandStage:
    """The chat commands' stage: /why of its own; the others come from the settings
    commands and the features."""
    return CommandStage(
        [WhyCommand(core.engine)],
        settings.superusers,
        core.sender,
        core.action_ids,
        syntax=Syntax(tuple(settings.command_start), tuple(settings.command_sep)),
        clock=utc_now,
    )


def _registry(
    core: CoreServices, conversation: Conversation, delivery: Delivery, commands: CommandStage
) -> SettingsRegistry:
    """The core's settings sections, and the chat commands that change them."""
    parts = CoreSectionParts(core.engine, conversation.policies, core.character,
                             core.settings_table, core.models, delivery.pacing,
                             core.bot_names, utc_now, delivery.safety)  # fmt: skip
    registry = core_registry(parts, core.agent_config)
    chat_model = bool(core.models.catalog.of_type(ModelType.CHAT))
    deps = ChatCommandDeps(core.engine, registry, utc_now, chat_model, core.models.budget)
    install_chat_commands(commands, deps)
    seed = stored_seed(core.agent_config, core.bot_names)
    commands.register(CharacterCommand(core.character, seed, utc_now), Audience.OWNER)
    commands.register(BudgetCommand(core.models.budget), Audience.OWNER)
    return registry


def _retention(
    settings: Settings, core: CoreServices, recorders: Recorders, registry: SettingsRegistry
) -> RetentionHolders:
    """The hourly clean-up, its section, and the holders features add theirs to."""
    holders = RetentionHolders()
    parts = RetentionParts(RetentionStore(core.engine), holders, core.settings_table,
                           recorders.call_log, _retention_policy(settings), utc_now)  # fmt: skip
    install_retention(parts, core.jobs, registry)
    return holders


def _assets_folder(settings: Settings) -> Path:
    """Where pictures, stickers and voices are kept, once each by content hash."""
    return settings.pallas_data_dir / ASSETS_FOLDER


def _ids(runner: RunnerDeps) -> Callable[[], int]:
    """Responder and command actions take ids from the turns' sequence (seeded at start)."""
    return lambda: runner.turn_ids.next()


def _retention_policy(settings: Settings) -> RetentionPolicy:
    """`.env`'s retention days: the defaults of the console's section (docs/retention.md)."""
    return RetentionPolicy(
        messages_days=settings.pallas_retention_messages_days,
        events_days=settings.pallas_retention_events_days,
        model_calls_days=settings.pallas_retention_model_calls_days,
        call_log_days=settings.pallas_retention_call_log_days,
    )


def _model_manager(
    settings: Settings, usage: LlmUsageWriter, call_log: CallLog, engine: AsyncEngine
) -> ModelManager:
    catalog = load_catalog(settings)
    deps = ManagerDeps(usage=usage.record, call_log=call_log, wall_clock=utc_now)
    limits = BudgetLimits(settings.pallas_daily_budget, settings.pallas_daily_token_budget)
    if limits.active:

        async def seed(since: datetime) -> Spend:
            cost, tokens = await spent_since(engine, since)
            return Spend(cost, tokens)

        async def seed_parts(since: datetime) -> dict[str, Spend]:
            parts = await spent_by_part(engine, since)
            return {key: Spend(cost, tokens) for key, (cost, tokens) in parts.items()}

        deps.budget = DailyBudget(limits, utc_now, seed, seed_parts=seed_parts)
        priced = any(m.pricing.input or m.pricing.output for m in catalog.models)
        if limits.cost is not None and not priced:
            logger.warning(
                "PALLAS_DAILY_BUDGET is set but no model has prices in the providers file: "
                "every call costs 0 and the cap is never reached (docs/cost.md); set prices, "
                "or PALLAS_DAILY_TOKEN_BUDGET to count tokens instead"
            )
    return ModelManager(catalog, deps)


def _tell_owners_of_the_budget(settings: Settings, core: CoreServices) -> None:
    budget = core.models.budget
    if budget is None:
        return
    budget.on_reached = tell_owners(core.engine, core.sender, budget, settings.superusers,
                                    core.action_ids, utc_now)  # fmt: skip
    table = core.settings_table

    async def load_raised(day: date) -> BudgetLimits | None:
        values = await table.load(RAISED_SECTION, day.isoformat())
        return replace(budget.limits, **values) if values else None

    async def save_raised(day: date, limits: BudgetLimits) -> None:
        values = {"cost": limits.cost, "tokens": limits.tokens}
        await table.save(RAISED_SECTION, day.isoformat(), values, utc_now())

    budget.load_raised, budget.save_raised = load_raised, save_raised


def _agent(
    core: CoreServices, outlet: RoutedOutlet, delivery: Delivery, tools: ToolSetup,
    plugged: Plugged, limits: Callable[[], AgentConfig] | None,
) -> TurnHandler:  # fmt: skip
    return build_agent_handler(
        engine=core.engine,
        ledger=core.ledger,
        models=core.models,
        outlet=outlet,
        delivery=delivery.sender,
        config=core.agent_config,
        sources=plugged.context_sources,
        preparers=plugged.preparers,
        forms=plugged.reply_forms,
        characters=plugged.characters,
        listeners=plugged.listeners,
        nicknames=core.bot_names,
        book=tools.book,
        skills=tools.skills,
        superusers=core.superusers,
        limits=limits,
        stored=core.character,
        notices=delivery.sender,
    )


def _announce_model_chat(catalog: Catalog) -> None:
    if catalog.of_type(ModelType.CHAT):
        types = ", ".join(
            f"{t.value}: {' '.join(m.name for m in catalog.of_type(t))}"
            for t in ModelType
            if catalog.of_type(t)
        )
        count = len(catalog.models)
        logger.info(
            "model chat is on ({} model{} from {}; {})",
            count,
            "" if count == 1 else "s",
            catalog.source,
            types,
        )
        return
    logger.warning(
        "model chat is off: set LLM_BASE_URL, LLM_API_KEY and LLM_MODEL in .env "
        "(or point PALLAS_PROVIDERS_FILE at a providers file with a chat model) to turn it "
        "on; everything that needs no model still runs"
    )
