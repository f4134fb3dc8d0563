"""What the catalog holds decides the agent's plan: one call or split (a `tool` model
decides, a `chat` model writes), the protocol, the rounds. Decided at start-up and again
when the console changes the per-turn limits, never mid-turn."""

from __future__ import annotations

from loguru import logger

from pallas.product.llm.agent.config import AgentConfig
from pallas.product.llm.agent.loop import AgentPlan
from pallas.product.llm.assembler.prompt import ProtocolMode
from pallas.providers.catalog import ModelType
from pallas.providers.manager import ModelManager


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
