"""Memory as a feature on the seam: the extraction job and its after-turn observer, the
nightly decay, the recall sources, the memory tools and section, what retention must keep
(docs/memory.md). Off with PALLAS_FEATURES_OFF=["memory"], or `memory: {enabled: false}` in
config/agent.yml; what was stored stays."""

from __future__ import annotations

from functools import partial

from loguru import logger

from pallas.product.conversation.commands import Audience
from pallas.product.conversation.turns.observers import TurnEnded, TurnObserver
from pallas.product.conversation.turns.turn import Turn
from pallas.product.extensions import Extension, Plugs
from pallas.product.llm.assembler.context import ContextBlock, ContextSource
from pallas.product.llm.tools.registry import FunctionPlugin
from pallas.product.memory.commands import ForgetMeCommand
from pallas.product.memory.config import MemoryConfig, MemoryKeys
from pallas.product.memory.console import (
    BEHAVIOR_PAGE,
    memory_actions,
    memory_facet,
    memory_routes,
)
from pallas.product.memory.decay import DECAY, DECAY_KIND, run_decay
from pallas.product.memory.embedding import Embedder
from pallas.product.memory.extraction import (
    EXTRACT_KIND,
    ExtractionDeps,
    MemoryObserver,
    extraction_model_type,
    run_extraction,
)
from pallas.product.memory.holds import memory_holds
from pallas.product.memory.recall import BehaviorGuidance, MemoryRecall
from pallas.product.memory.settings import memory_section
from pallas.product.memory.store import MemoryStore
from pallas.product.memory.teachers import RefusalNotices, UnkeptTeachingNote
from pallas.product.memory.tools import memory_tools
from pallas.product.settings.applied import Live
from pallas.product.settings.features import Feature, FeatureGate

EXTRACTION_TIMEOUT_S = 120.0


def memory_extension(config: MemoryConfig | None = None) -> Extension:
    """Memory as a feature; `config` stands in for the agent file's `memory:` (tests)."""
    return Extension(
        name="memory",
        install=partial(install_memory, config=config),
        summary="记住群友说过的自己的事和群里的规矩，按需想起来，说错了能改",
        config=MemoryKeys,
    )


def install_memory(plugs: Plugs, config: MemoryConfig | None = None) -> None:
    core = plugs.core
    config = config or plugs.config.memory
    store = MemoryStore(core.engine)
    _install_keeping(plugs, store)
    if not config.enabled:
        logger.info("memory is off (memory.enabled is false in config/agent.yml)")
        return
    live = Live(config)  # what the parts read where they act; the console changes it
    plugs.add_section(memory_section(core.settings_table, live))
    embedder = Embedder(core.models, store, core.engine, lambda: live().embedding_timeout_s)
    deps = ExtractionDeps(
        engine=core.engine,
        store=store,
        models=core.models,
        config=live,
        clock=core.clock,
        superusers=core.superusers,
        embedder=embedder,
        tools=plugs.extraction_tools,
        notices=RefusalNotices(core.sender, core.action_ids),
    )
    plugs.add_job(EXTRACT_KIND, partial(run_extraction, deps=deps), timeout_s=EXTRACTION_TIMEOUT_S)
    plugs.add_job(DECAY_KIND, partial(run_decay, store=store, clock=core.clock))
    plugs.add_periodic_job(DECAY)
    if extraction_model_type(core.models) is not None:
        plugs.add_observer(_SwitchedObserver(MemoryObserver(core.jobs, live), core.features))
    else:  # recall of what is stored still runs; nothing new is extracted
        logger.info("memory: no model that can call tools is registered; nothing is extracted")
    recall = MemoryRecall(core.engine, live, core.clock, embedder)
    behavior = BehaviorGuidance(store, live)
    plugs.add_context_source(_SwitchedSource(recall, core.features))
    plugs.add_context_source(_SwitchedSource(behavior, core.features))
    unkept = UnkeptTeachingNote(core.engine, core.superusers, core.clock)
    plugs.add_context_source(_SwitchedSource(unkept, core.features))
    plugs.add_tool_plugin(
        FunctionPlugin("memory", "记忆：查找、纠正、忘掉记下的事", common=memory_tools(store))
    )


def _install_keeping(plugs: Plugs, store: MemoryStore) -> None:
    """What keeps what is stored in reach, learning or not: its evidence held from the
    clean-up, facts other features hand over, /忘记我, the console's person page."""
    core = plugs.core
    plugs.add_retention_hold("memory", partial(memory_holds, core.engine))
    plugs.add_fact_keeper(store.remember)
    plugs.add_command(ForgetMeCommand(store, core.clock), Audience.MEMBER)
    plugs.add_api_routes(memory_routes(store, core.clock))
    plugs.add_person_facet(memory_facet(store))
    for name, action in memory_actions(store).items():
        plugs.add_person_action(name, action)
    plugs.add_owner_page(BEHAVIOR_PAGE)


EXTENSION = memory_extension()


class _SwitchedSource:
    """A memory context source that says nothing in a group whose memory is switched off."""

    def __init__(self, source: ContextSource, features: FeatureGate) -> None:
        self.name = source.name
        self._source = source
        self._features = features

    async def fetch(self, turn: Turn) -> ContextBlock | None:
        if not await self._features.allows(turn.stream_id, Feature.MEMORY):
            return None
        return await self._source.fetch(turn)


class _SwitchedObserver:
    """The extraction's observer, silent in a group whose memory is switched off."""

    def __init__(self, observer: TurnObserver, features: FeatureGate) -> None:
        self.name = observer.name
        self._observer = observer
        self._features = features

    async def turn_ended(self, ended: TurnEnded) -> None:
        if await self._features.allows(ended.stream_id, Feature.MEMORY):
            await self._observer.turn_ended(ended)
