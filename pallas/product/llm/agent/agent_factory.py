"""Building the agent once at start-up (the plan: agent/plan.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.delivery.contract import Outlet, ReplyDelivery
from pallas.product.llm.agent.config import AgentConfig
from pallas.product.llm.agent.handler import AgentHandlerDeps, AgentTurnHandler
from pallas.product.llm.agent.loop import AgentDeps
from pallas.product.llm.agent.plan import plan_for
from pallas.product.llm.agent.reply_forms import IntentListener, ReplyForm
from pallas.product.llm.assembler.context import (
    AssemblyDeps,
    Character,
    CharacterSource,
    ContextSource,
    TurnPreparer,
)
from pallas.product.llm.tool_loop import ToolLoopDeps
from pallas.product.llm.tools.book import ToolBook
from pallas.product.llm.tools.skills import SkillBook
from pallas.providers.manager import ModelManager
from pallas.store.ledger import LedgerWriter


def seed_character(config: AgentConfig, nicknames: tuple[str, ...]) -> Character:
    """The character in the agent file (its `persona:` key): every account's, until it is
    edited in the store."""
    return Character(
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
    characters: Sequence[CharacterSource] = (),
    listeners: Sequence[IntentListener] = (),
    limits: Callable[[], AgentConfig] | None = None,
) -> AgentTurnHandler:
    """`config` is the agent file's; `limits` reads the per-turn limits as they are now
    (the console's `agent` section), the agent file's when not given."""
    character = seed_character(config, nicknames)
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
                character,
                config.context_token_budget,
                sources=sources,
                skills=skills,
                preparers=preparers,
                characters=characters,
            ),
            agent=AgentDeps(models, plan) if plan else None,
            tools=ToolLoopDeps(book, ledger),
            outlet=outlet,
            delivery=delivery,
            limits=limits or (lambda: config),
            bot_names=(character.name, *nicknames),
            superusers=superusers,
            forms=forms,
            listeners=listeners,
        )
    )
