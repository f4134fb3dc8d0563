"""Building the agent once at start-up: what the catalog holds decides the plan."""

from __future__ import annotations

from collections.abc import Sequence

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.delivery.contract import Outlet, ReplyDelivery
from pallas.product.llm.agent.config import AgentConfig
from pallas.product.llm.agent.handler import AgentHandlerDeps, AgentTurnHandler
from pallas.product.llm.agent.loop import AgentDeps, AgentPlan
from pallas.product.llm.agent.reply_forms import IntentListener, ReplyForm
from pallas.product.llm.assembler.context import (
    AssemblyDeps,
    ContextSource,
    Persona,
    PersonaSource,
    TurnPreparer,
)
from pallas.product.llm.assembler.prompt import ProtocolMode
from pallas.product.llm.tool_loop import ToolLoopDeps
from pallas.product.llm.tools.book import ToolBook
from pallas.product.llm.tools.skills import SkillBook
from pallas.providers.catalog import ModelType
from pallas.providers.manager import ModelManager
from pallas.store.ledger import LedgerWriter


def plan_for(models: ModelManager, config: AgentConfig) -> AgentPlan | None:
    """None when no chat model exists. Split mode needs both a tool and a chat model;
    without either it is the single call, decided here and not mid-turn."""
    if not models.has(ModelType.CHAT):
        return None
    split = config.split_reply and models.has(ModelType.TOOL)
    decision_type = ModelType.TOOL if split else ModelType.CHAT
    native = models.supports_tools(decision_type)
    mode = ProtocolMode.NATIVE if native else ProtocolMode.TEXT
    if config.split_reply and not split:
        logger.warning("split_reply is on but no `tool` model is registered: using one call")
    return AgentPlan(decision_type, mode, split, max_rounds=config.max_rounds)


def seed_persona(config: AgentConfig, nicknames: tuple[str, ...]) -> Persona:
    """The persona in the agent file: every account's, until it is edited in the store."""
    return Persona(
        name=config.persona.name or nicknames[0],
        description=config.persona.description,
        style=config.persona.style,
    )


def build_agent_handler(
    *,
    engine: AsyncEngine,
    ledger: LedgerWriter,
    models: ModelManager,
    outlet: Outlet,
    delivery: ReplyDelivery,
    config: AgentConfig,
    nicknames: tuple[str, ...],
    book: ToolBook,
    skills: SkillBook | None = None,
    superusers: frozenset[str] = frozenset(),
    sources: Sequence[ContextSource] = (),
    preparers: Sequence[TurnPreparer] = (),
    forms: Sequence[ReplyForm] = (),
    personas: Sequence[PersonaSource] = (),
    listeners: Sequence[IntentListener] = (),
) -> AgentTurnHandler:
    persona = seed_persona(config, nicknames)
    plan = plan_for(models, config)
    if plan is not None:
        logger.info(
            "agent: {} protocol on {} models{}",
            plan.mode.value,
            plan.decision_type.value,
            ", split reply" if plan.split else "",
        )
    return AgentTurnHandler(
        AgentHandlerDeps(
            engine=engine,
            ledger=ledger,
            assembly=AssemblyDeps(
                engine,
                persona,
                config.context_token_budget,
                sources=sources,
                skills=skills,
                preparers=preparers,
                personas=personas,
            ),
            agent=AgentDeps(models, plan) if plan else None,
            tools=ToolLoopDeps(book, ledger),
            outlet=outlet,
            delivery=delivery,
            config=config,
            bot_names=(persona.name, *nicknames),
            superusers=superusers,
            forms=forms,
            listeners=listeners,
        )
    )
