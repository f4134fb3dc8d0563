"""Plugging memory into the core: the extraction job and its after-turn observer, the nightly
decay, the recall sources and the memory tools (docs/memory.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.conversation.retention import RetentionHolders
from pallas.product.conversation.turns.observers import TurnEnded, TurnObserver, TurnObservers
from pallas.product.conversation.turns.turn import Turn
from pallas.product.llm.assembler.context import ContextBlock, ContextSource
from pallas.product.llm.tools.registry import FunctionPlugin, ToolRegistry
from pallas.product.memory.config import MemoryConfig
from pallas.product.memory.decay import DECAY, DECAY_KIND, run_decay
from pallas.product.memory.embedding import Embedder
from pallas.product.memory.extraction import (
    EXTRACT_KIND,
    ExtractionDeps,
    MemoryObserver,
    extraction_model_type,
    run_extraction,
)
from pallas.product.memory.extraction_tools import ExtractionTool
from pallas.product.memory.recall import BehaviorGuidance, MemoryRecall
from pallas.product.memory.settings import MemoryParts, memory_section
from pallas.product.memory.tools import memory_tools
from pallas.product.settings.features import Feature, FeatureGate
from pallas.product.settings.registry import SettingsRegistry
from pallas.providers.manager import ModelManager
from pallas.store.memory import MemoryStore
from pallas.store.retention import memory_holds
from pallas.store.settings_table import SettingsTable

EXTRACTION_TIMEOUT_S = 120.0


@dataclass
class MemoryHost:
    """What memory plugs into."""

    engine: AsyncEngine
    store: MemoryStore
    models: ModelManager
    jobs: Jobs
    observers: TurnObservers
    sources: list[ContextSource]
    registry: ToolRegistry
    clock: Callable[[], datetime]
    settings: SettingsRegistry  # where the `memory` section is registered
    settings_table: SettingsTable
    superusers: frozenset[str] = frozenset()
    # Features' tools in the extraction call (persona's relation notes); a shared list.
    extraction_tools: list[ExtractionTool] = field(default_factory=list)
    features: FeatureGate | None = None  # each group's switch: memory on or off there
    retention: RetentionHolders | None = None  # told what memory holds (its evidence)


def install_memory(host: MemoryHost, config: MemoryConfig) -> None:
    embedder = Embedder(host.models, host.store, host.engine, config.embedding_timeout_s)
    deps = ExtractionDeps(
        engine=host.engine,
        store=host.store,
        models=host.models,
        config=config,
        clock=host.clock,
        superusers=host.superusers,
        embedder=embedder,
        tools=host.extraction_tools,
    )
    host.jobs.handle(
        EXTRACT_KIND, partial(run_extraction, deps=deps), timeout_s=EXTRACTION_TIMEOUT_S
    )
    host.jobs.handle(DECAY_KIND, partial(run_decay, store=host.store, clock=host.clock))
    host.jobs.every(DECAY)
    if host.retention is not None:
        host.retention.hold("memory", partial(memory_holds, host.engine))
    observer = None
    if extraction_model_type(host.models) is not None:
        observer = MemoryObserver(host.jobs, config)
        host.observers.register(_observer(observer, host.features))
    else:  # recall of what is stored still runs; nothing new is extracted
        logger.info("memory: no model that can call tools is registered; nothing is extracted")
    recall = MemoryRecall(host.engine, config, host.clock, embedder)
    behavior = BehaviorGuidance(host.store, config)
    host.sources.extend([_source(recall, host.features), _source(behavior, host.features)])
    parts = MemoryParts(deps, observer, recall, behavior, embedder)
    host.settings.register(memory_section(host.settings_table, config, parts))
    host.registry.register_plugin(
        FunctionPlugin("memory", "记忆：查找、纠正、忘掉记下的事", common=memory_tools(host.store))
    )


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


def _source(source: ContextSource, features: FeatureGate | None) -> ContextSource:
    return source if features is None else _SwitchedSource(source, features)


def _observer(observer: TurnObserver, features: FeatureGate | None) -> TurnObserver:
    return observer if features is None else _SwitchedObserver(observer, features)
