"""Building the agent once at start-up (the plan: agent/plan.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.clock import utc_now
from pallas.product.conversation.delivery.contract import Outlet, ReplyDelivery, Sender
from pallas.product.conversation.turns.turn import Turn
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
from pallas.store.character import CharacterStore, StoredCharacter
from pallas.store.ledger import LedgerWriter


def seed_character(config: AgentConfig, nicknames: tuple[str, ...]) -> Character:
    """The character in the agent file (its `persona:` key): every account's, until it is
    edited in the store."""
    return Character(
        name=config.persona.name or nicknames[0],
        description=config.persona.description,
        style=config.persona.style,
    )


def stored_seed(config: AgentConfig, nicknames: tuple[str, ...]) -> StoredCharacter:
    """The agent file's character as the store seeds an account with it."""
    seed = seed_character(config, nicknames)
    return StoredCharacter(seed.name, seed.description, seed.style)


class StoredCharacterSource:
    """Who the bot is in a turn when no feature keeps more (persona adds its state line on
    top): the account's character as stored, edited by /人设 or the console."""

    def __init__(
        self, store: CharacterStore, seed: Character, clock: Callable[[], datetime]
    ) -> None:
        self._store = store
        self._seed = seed
        self._stored_seed = StoredCharacter(seed.name, seed.description, seed.style)
        self._clock = clock

    async def character(self, turn: Turn) -> Character:
        stored = await self._store.character(turn.stream.self_id, self._stored_seed, self._clock())
        return Character(stored.name or self._seed.name, stored.description, stored.style)


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
    stored: CharacterStore | None = None,
    notices: Sender | None = None,
) -> AgentTurnHandler:
    """`config` is the agent file's; `limits` reads the per-turn limits as they are now
    (the console's `agent` section), the agent file's when not given; `stored` is where each
    account's edited character is kept (features' character sources come after it)."""
    character = seed_character(config, nicknames)
    if stored is not None:
        own = StoredCharacterSource(stored, character, utc_now)
        characters = (own, *characters)
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
            notices=notices,
        )
    )
