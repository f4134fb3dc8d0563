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
from pallas.product.conversation.turns.observers import TurnObservers
from pallas.product.llm.assembler.context import ContextSource
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
from pallas.product.memory.tools import memory_tools
from pallas.providers.manager import ModelManager
from pallas.store.memory import MemoryStore

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
    superusers: frozenset[str] = frozenset()
    # Features' tools in the extraction call (persona's relation notes); a shared list.
    extraction_tools: list[ExtractionTool] = field(default_factory=list)


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
    if extraction_model_type(host.models) is not None:
        host.observers.register(MemoryObserver(host.jobs, config))
    else:  # recall of what is stored still runs; nothing new is extracted
        logger.info("memory: no model that can call tools is registered; nothing is extracted")
    host.sources.extend(
        [
            MemoryRecall(host.engine, config, host.clock, embedder),
            BehaviorGuidance(host.store, config),
        ]
    )
    host.registry.register_plugin(
        FunctionPlugin("memory", "记忆：查找、纠正、忘掉记下的事", common=memory_tools(host.store))
    )
