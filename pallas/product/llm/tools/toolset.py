"""The registry the bot starts with: built-in tools, then what plugins declare."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.llm.agent.actions import TERMINAL
from pallas.product.llm.tools.book import ToolBook
from pallas.product.llm.tools.builtin.core import (
    ChatHistoryTool,
    ChatMessageTool,
    FindToolsTool,
    TimeNowTool,
)
from pallas.product.llm.tools.builtin.web import WebFetchTool, WebSearchTool
from pallas.product.llm.tools.registry import ToolRegistry
from pallas.product.llm.tools.skills import (
    BUILTIN_SKILLS_DIR,
    SkillBook,
    load_skills,
    owner_skills_dir,
    skill_tools,
)


@dataclass(frozen=True)
class ToolSetup:
    book: ToolBook
    skills: SkillBook


def build_tools(
    engine: AsyncEngine, data_dir: Path, *, search_api_url: str = "", search_api_key: str = ""
) -> ToolSetup:
    registry = ToolRegistry()
    # The terminal actions are essential: a turn must always be able to end.
    book = ToolBook(registry, engine, frozenset(action.value for action in TERMINAL))
    loaded = load_skills(BUILTIN_SKILLS_DIR, owner_skills_dir(data_dir))
    skills = SkillBook(engine, loaded, plugin_of=registry.skill_plugin)
    builtin = (
        FindToolsTool(book),
        TimeNowTool(),
        ChatHistoryTool(),
        ChatMessageTool(),
        WebSearchTool(search_api_url, search_api_key),
        WebFetchTool(),
    )
    for tool in (*builtin, *skill_tools(skills)):
        registry.register(tool)
    return ToolSetup(book, skills)
