"""The core's own settings sections, in the order the console lists them; features register
theirs after these when they are installed (docs/console.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.gate.policy_book import PolicyBook
from pallas.product.llm.agent.agent_factory import stored_seed
from pallas.product.llm.agent.config import AgentConfig
from pallas.product.settings.agent_section import agent_section
from pallas.product.settings.applied import Live
from pallas.product.settings.budget_section import (
    BudgetShares,
    budget_section,
    group_budget_section,
    group_share_reader,
    shares_of,
)
from pallas.product.settings.delivery_section import LivePacing, delivery_section
from pallas.product.settings.features import features_section, notices_section
from pallas.product.settings.models_section import models_section
from pallas.product.settings.outgoing_section import OutgoingSafety, outgoing_section
from pallas.product.settings.registry import SettingsRegistry
from pallas.product.settings.sections import character_section, gate_section
from pallas.providers.manager import ModelManager
from pallas.store.character import CharacterStore
from pallas.store.setting_history import SettingHistory
from pallas.store.settings_table import SettingsTable


@dataclass(frozen=True)
class CoreSectionParts:
    engine: AsyncEngine
    policies: PolicyBook
    character: CharacterStore  # the bot's name, description and style per account
    table: SettingsTable
    models: ModelManager
    pacing: LivePacing  # what the dispatcher reads at every send
    nicknames: tuple[str, ...]
    clock: Callable[[], datetime]
    safety: Live[OutgoingSafety]  # the link rule the outgoing screen reads


def core_registry(parts: CoreSectionParts, config: AgentConfig) -> SettingsRegistry:
    """The core's sections; the agent reads its limits through the `agent` section's
    reader (`registry.section("agent").current`), the dispatcher its pacing through
    `parts.pacing`."""
    registry = SettingsRegistry(SettingHistory(parts.engine))
    registry.register(gate_section(parts.engine, parts.policies))
    registry.register(features_section(parts.table))
    registry.register(notices_section(parts.table))
    registry.register(models_section(parts.table, parts.models))
    registry.register(agent_section(parts.table, Live(config)))
    registry.register(delivery_section(parts.table, parts.pacing))
    registry.register(outgoing_section(parts.table, parts.safety))
    _register_budget(registry, parts)
    seed = stored_seed(config, parts.nicknames)
    registry.register(character_section(parts.character, seed, parts.clock))
    return registry


def _register_budget(registry: SettingsRegistry, parts: CoreSectionParts) -> None:
    """The budget's shares, read by the daily budget at every call (when a cap is set)."""
    shares = Live(BudgetShares())
    registry.register(budget_section(parts.table, shares, parts.models))
    registry.register(group_budget_section(parts.table))
    budget = parts.models.budget
    if budget is not None:
        budget.shares = lambda: shares_of(shares())
        budget.group_share = group_share_reader(parts.table)
