"""The object graph, built once at start-up.

settings -> store -> timeline writer -> ingress -> stage list (STAGE_ORDER) -> turn buffers
  -> turn runner -> after-turn observers
store -> outbox (the one way out) -> dispatcher -> OneBot outlet
store -> jobs (handlers and periodic jobs registered by features) -> job worker
settings -> model catalog -> model manager (usage rows to the store, traffic to the call log)
turn runner -> agent (context, decision, delivery through the OneBot outlet)
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.config import Settings
from pallas.console.token import ensure_console_token
from pallas.core.assets import ASSETS_FOLDER
from pallas.features import BUILT_IN_FEATURES
from pallas.platform.onebot.lookups import PlatformLookups
from pallas.platform.onebot.outlet import OneBotOutlet
from pallas.platform.routed_outlet import RoutedOutlet
from pallas.platform.sandbox import SandboxHub, SandboxOutlet
from pallas.product.conversation.commands import CommandStage, Syntax
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery, OutboxDispatcher
from pallas.product.conversation.delivery.pacing import DeliveryPolicy
from pallas.product.conversation.delivery.payload import asset_checker
from pallas.product.conversation.gate.activity_book import ActivityBook
from pallas.product.conversation.gate.admission import Admission, AdmissionDeps
from pallas.product.conversation.gate.policy import GatePolicy
from pallas.product.conversation.gate.policy_book import PolicyBook
from pallas.product.conversation.ingress import Ingress
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.conversation.retention import RetentionHolders, RetentionPolicy
from pallas.product.conversation.silence import BlockedUsers, SilenceStage
from pallas.product.conversation.stages import Stage, StageList
from pallas.product.conversation.turns.buffers import TurnBuffers
from pallas.product.conversation.turns.proactive import ProactiveTurns
from pallas.product.conversation.turns.recovery import RecoveryDeps, recover_kernel
from pallas.product.conversation.turns.runner import RunnerDeps, TurnIds, run_turn
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
from pallas.product.llm.agent.agent_factory import build_agent_handler
from pallas.product.llm.agent.config import AgentConfig, AgentFile
from pallas.product.llm.tools.toolset import ToolSetup, build_tools
from pallas.product.ports import Facts
from pallas.product.settings.core_sections import (
    CoreSectionParts,
    agent_reconfigure,
    core_registry,
)
from pallas.product.settings.features import FeatureGate
from pallas.product.settings.registry import SettingsRegistry
from pallas.product.settings.retention_section import RetentionParts, install_retention
from pallas.product.steering.commands import SteeringDeps, install_steering
from pallas.providers.call_log import CallLog
from pallas.providers.catalog import Catalog, ModelType
from pallas.providers.manager import ManagerDeps, ModelManager
from pallas.providers.providers_file import load_catalog
from pallas.store import kernel_state
from pallas.store.asset_store import AssetStore
from pallas.store.character import CharacterStore
from pallas.store.engine import backend_name, create_engine
from pallas.store.failures import classify, explain, short_detail
from pallas.store.jobs import JobStore
from pallas.store.ledger import LedgerWriter
from pallas.store.llm_usage import LlmUsageWriter
from pallas.store.members import temp_chat_group
from pallas.store.migrate import upgrade_to_head
from pallas.store.outbox import OutboxStore
from pallas.store.retention import RetentionStore
from pallas.store.settings_table import SettingsTable
from pallas.store.timeline import TimelineWriter

LOTTERY_SEED = "pallas-ambient"

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


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class KernelConfig:
    gate: GatePolicy = field(default_factory=GatePolicy)
    delivery: DeliveryPolicy = field(default_factory=DeliveryPolicy)
    # Admitted messages younger than this that no turn consumed are re-buffered at start-up.
    rebuffer_window: timedelta = timedelta(minutes=2)


@dataclass
class Runtime:
    settings: Settings
    engine: AsyncEngine
    writer: TimelineWriter
    ledger: LedgerWriter
    ingress: Ingress
    stages: StageList
    turn_buffers: TurnBuffers
    proactive: ProactiveTurns  # turns the bot starts itself, through the same runner
    runner: RunnerDeps
    policies: PolicyBook
    kernel: KernelConfig
    models: ModelManager
    usage: LlmUsageWriter
    call_log: CallLog
    tools: ToolSetup
    dispatcher: OutboxDispatcher
    outbox: OutboxStore
    sender: OutboxDelivery
    extensions: Installed  # the features that run, their tables and start/stop hooks
    jobs: Jobs
    lookups: PlatformLookups
    assets: AssetStore
    settings_registry: SettingsRegistry  # every behaviour knob, stored (docs/console.md)
    outlet: RoutedOutlet  # NapCat's chats and the console's sandbox
    silence: SilenceStage
    agent_config: AgentConfig
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
        ones; a test passes what it exercises)."""
        kernel = kernel or KernelConfig()
        engine = create_engine(settings.database_url)
        # One writer at a time on SQLite; PostgreSQL writers may overlap.
        lock = asyncio.Lock() if backend_name(engine) == "sqlite" else None
        writer = TimelineWriter(engine, write_lock=lock)
        ledger = LedgerWriter(engine, write_lock=lock)
        usage = LlmUsageWriter(engine, write_lock=lock)
        call_log = CallLog(settings.pallas_data_dir / "logs" / "llm", started_at=utc_now())
        models = _model_manager(settings, usage, call_log)
        activities, policies = ActivityBook(engine), PolicyBook(engine, kernel.gate)
        outbox = OutboxStore(engine, write_lock=lock)
        jobs = Jobs(JobStore(engine, write_lock=lock), utc_now)
        asset_store = AssetStore(engine, settings.pallas_data_dir / ASSETS_FOLDER, write_lock=lock)
        agent_file = AgentFile.read()
        agent_config = agent_file.core(config_models(BUILT_IN_FEATURES, features))
        character = CharacterStore(engine, write_lock=lock)
        table = SettingsTable(engine, write_lock=lock)
        feature_gate = FeatureGate(table)
        runner = RunnerDeps(
            ledger=ledger,
            handler=handler or NoTurnHandler(),  # replaced by the agent below
            turn_ids=TurnIds(0),
            activity=activities.get,
            policy=policies.get,
            clock=utc_now,
            lottery_seed=LOTTERY_SEED,
            queued_replies=outbox.waiting_messages,
        )
        turn_buffers = TurnBuffers(partial(run_turn, deps=runner), ledger)
        admission = Admission(
            AdmissionDeps(
                engine=engine,
                ledger=ledger,
                turn_buffers=turn_buffers,
                activities=activities,
                policies=policies,
                names=tuple(settings.nickname),
                clock=utc_now,
                lottery_seed=LOTTERY_SEED,
            )
        )
        silence = SilenceStage([BlockedUsers(settings.pallas_blocked_users)], utc_now)
        stages = StageList(_core_stages(silence, admission), ledger, admission, STAGE_ORDER)
        ingress = Ingress(writer, stages)
        assets = settings.pallas_data_dir / ASSETS_FOLDER
        route = partial(temp_chat_group, engine)
        sandbox_hub = SandboxHub()
        outlet = RoutedOutlet(
            OneBotOutlet(ingress, route=route, assets=assets),
            SandboxOutlet(ingress, sandbox_hub, utc_now),
        )
        dispatcher = OutboxDispatcher(outbox, outlet, ledger, kernel.delivery, utc_now)
        delivery = OutboxDelivery(outbox, dispatcher, utc_now, asset_checker(assets))
        action_ids = _ids(runner)
        commands = CommandStage(
            [WhyCommand(engine)],
            settings.superusers,
            delivery,
            action_ids,
            syntax=Syntax(tuple(settings.command_start), tuple(settings.command_sep)),
            clock=utc_now,
        )
        stages.register(commands)
        tools = build_tools(
            engine,
            settings.pallas_data_dir,
            search_api_url=settings.web_search_api_url,
            search_api_key=settings.tavily_api_key,
        )
        parts = CoreSectionParts(engine, policies, character, table, models, dispatcher,
                                 tuple(settings.nickname), utc_now)  # fmt: skip
        registry = core_registry(parts, agent_config, agent_reconfigure(lambda: runner.handler))
        install_steering(commands, SteeringDeps(engine, registry, utc_now))
        retention = RetentionHolders()
        kept = _retention_policy(settings)
        prune = RetentionParts(RetentionStore(engine, write_lock=lock), retention, table, call_log,
                               kept, utc_now)  # fmt: skip
        install_retention(prune, jobs, registry)
        proactive = ProactiveTurns(engine, turn_buffers, runner)
        core = CoreServices(
            engine, lock or asyncio.Lock(), ledger, delivery, outbox, action_ids, utc_now,
            settings.pallas_data_dir, outlet.nickname, feature_gate, table, settings, jobs,
            models, agent_config, frozenset(settings.superusers), asset_store, Facts(),
            proactive, tuple(settings.nickname), character,
        )  # fmt: skip
        targets = Targets(stages, commands, jobs, registry, runner.observers,
                          tools.book.registry, retention, dispatcher, silence)  # fmt: skip
        extensions = install_all(features, core, targets, BUILT_IN_FEATURES, agent_file)
        if handler is None:
            # The agent acts through the platform, which records the bot's own messages
            # through the ingress: built last, with what the features plugged, then plugged
            # into the turn runner.
            runner.handler = _agent(
                settings, engine, ledger, models, outlet, delivery, tools, agent_config,
                extensions.plugged,
            )  # fmt: skip
        return cls(
            settings=settings,
            engine=engine,
            writer=writer,
            ledger=ledger,
            ingress=ingress,
            stages=stages,
            turn_buffers=turn_buffers,
            proactive=proactive,
            runner=runner,
            policies=policies,
            kernel=kernel,
            models=models,
            usage=usage,
            call_log=call_log,
            tools=tools,
            dispatcher=dispatcher,
            outbox=outbox,
            sender=delivery,
            extensions=extensions,
            jobs=jobs,
            lookups=PlatformLookups(ingress),
            assets=asset_store,
            agent_config=agent_config,
            settings_registry=registry,
            outlet=outlet,
            silence=silence,
        )

    @property
    def database_backend(self) -> str:
        return backend_name(self.engine)

    @property
    def model_chat_enabled(self) -> bool:
        return self.models.has(ModelType.CHAT)

    async def start(self) -> None:
        data_dir = self.settings.pallas_data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        try:
            # `python bot.py` has migrated already (pallas/store/preflight.py): this finds the
            # store at its head, unless something changed it in between.
            await upgrade_to_head(self.engine, self.extensions.migrations)
        except Exception as exc:
            url = self.engine.url.render_as_string(hide_password=False)
            logger.critical(explain(classify(exc, migrating=True), url, short_detail(exc)))
            raise
        self.writer.start()
        self.ledger.start()
        self.usage.start()
        if not self.models.catalog.empty:
            self.call_log.open()
        await self.tools.book.purge_essential_switches(utc_now())
        await self.settings_registry.restore()  # the model choice, the reply limits
        await self.dispatcher.recover()
        self.dispatcher.start()
        self.runner.turn_ids = TurnIds(await kernel_state.max_turn_id(self.engine))
        await recover_kernel(
            RecoveryDeps(
                engine=self.engine,
                ledger=self.ledger,
                turn_buffers=self.turn_buffers,
                gate=self.stages,
                window=self.kernel.rebuffer_window,
                clock=utc_now,
            )
        )
        self.turn_buffers.start()
        await self.jobs.start()
        await self.extensions.lifespans.start()
        # Everything loaded so far lives for the whole run: keep it out of the collector's
        # full passes, which otherwise stall the event loop for tens of milliseconds.
        gc.collect()
        gc.freeze()
        self.console_token = ensure_console_token(self.settings.pallas_console_token, data_dir)
        logger.info("store ready: {} database", self.database_backend)
        _announce_model_chat(self.models.catalog)

    async def stop(self) -> None:
        await self.extensions.lifespans.stop()
        await self.jobs.stop()
        await self.turn_buffers.stop()
        await self.runner.observers.drain()
        await self.dispatcher.stop()
        await self.models.close()
        await self.writer.close()
        await self.ledger.close()
        await self.usage.close()
        self.call_log.close()
        await self.engine.dispose()


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


def _core_stages(silence: SilenceStage, gate: Admission) -> list[Stage]:
    """The stages of the core; features register the others into STAGE_ORDER (the seam)."""
    return [silence, gate]


def _model_manager(settings: Settings, usage: LlmUsageWriter, call_log: CallLog) -> ModelManager:
    return ModelManager(
        load_catalog(settings),
        ManagerDeps(usage=usage.record, call_log=call_log, wall_clock=utc_now),
    )


def _agent(
    settings: Settings,
    engine: AsyncEngine,
    ledger: LedgerWriter,
    models: ModelManager,
    outlet: RoutedOutlet,
    delivery: OutboxDelivery,
    tools: ToolSetup,
    config: AgentConfig,
    plugs: Plugged,
) -> TurnHandler:
    return build_agent_handler(
        engine=engine,
        ledger=ledger,
        models=models,
        outlet=outlet,
        delivery=delivery,
        config=config,
        sources=plugs.context_sources,
        preparers=plugs.preparers,
        forms=plugs.reply_forms,
        personas=plugs.personas,
        listeners=plugs.listeners,
        nicknames=tuple(settings.nickname),
        book=tools.book,
        skills=tools.skills,
        superusers=frozenset(settings.superusers),
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
