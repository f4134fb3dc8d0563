"""Skills: Markdown documents for the model, read on demand instead of sitting in every prompt.

A skill is a file with a YAML front matter block (`name`, `description`) and a Markdown body.
Built-in skills ship in `skills_builtin/`; the owner's, in `<PALLAS_DATA_DIR>/skills/`,
override a built-in of the same name. Each skill has two stored switches (kind "skill"):
`enabled` (default on) and `embedded` (default off: listed and fetched with `skills.get`;
on: its body goes into every prompt). A bad file is skipped with one warning, never fatal.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.llm.tools.base import (
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolSpec,
    ToolTag,
    Visibility,
)
from pallas.store.capabilities import Setting, load_settings, save_setting

SETTING_KIND = "skill"
PLUGIN_KIND = "plugin"  # the function-plugin switches (see tools/book.py)
SKILL_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
BUILTIN_SKILLS_DIR = Path(__file__).resolve().parent / "skills_builtin"
OWNER_SKILLS_SUBDIR = "skills"
FENCE = "---"
GET_MAX_CHARS = 8000
EMBEDDED_MAX_CHARS = 4000
CUT_MARKER = "\n……（内容过长，后面的部分已省略）"


class SkillSource(StrEnum):
    BUILTIN = "builtin"
    OWNER = "owner"


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str
    source: SkillSource
    path: Path


@dataclass(frozen=True)
class SkillState:
    skill: Skill
    enabled: bool
    embedded: bool


class SkillFileError(ValueError):
    """Why a skill file was skipped (for the start-up warning)."""


# --- files -------------------------------------------------------------------------------


def owner_skills_dir(data_dir: Path) -> Path:
    return data_dir / OWNER_SKILLS_SUBDIR


def load_skills(builtin_dir: Path, owner_dir: Path) -> dict[str, Skill]:
    """Every valid skill of both folders, the owner's winning a name clash, sorted by name."""
    skills = _load_dir(builtin_dir, SkillSource.BUILTIN)
    for name, skill in _load_dir(owner_dir, SkillSource.OWNER).items():
        if name in skills:
            logger.info("skill {}: {} overrides the built-in one", name, skill.path)
        skills[name] = skill
    return {name: skills[name] for name in sorted(skills)}


def _load_dir(folder: Path, source: SkillSource) -> dict[str, Skill]:
    try:
        paths = sorted(folder.glob("*.md")) if folder.is_dir() else []  # no folder: no skills
    except OSError as exc:
        logger.warning("skill folder {} skipped: {}", folder, exc)
        return {}
    skills: dict[str, Skill] = {}
    for path in paths:
        try:
            skill = parse_skill(path, source)
        except SkillFileError as exc:
            logger.warning("skill file {} skipped: {}", path, exc)
            continue
        if skill.name in skills:
            other = skills[skill.name].path.name
            logger.warning(
                "skill file {} skipped: name {!r} already used by {}", path, skill.name, other
            )
            continue
        skills[skill.name] = skill
    return skills


def parse_skill(path: Path, source: SkillSource) -> Skill:
    """One file into a skill, or `SkillFileError` saying what is wrong with it."""
    try:
        text = path.read_bytes().decode("utf-8-sig")  # -sig: tolerate a BOM from Windows editors
    except UnicodeDecodeError as exc:
        raise SkillFileError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise SkillFileError(f"cannot read it: {exc}") from exc
    meta, body = _split_front_matter(text.replace("\r\n", "\n"))
    name = _name(meta, path)
    description = _description(meta)
    if not body:
        raise SkillFileError("the body is empty")
    return Skill(name, description, body, source, path)


def _split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    if not text.strip():
        raise SkillFileError("the file is empty")
    lines = text.split("\n")
    if lines[0].rstrip() != FENCE:
        raise SkillFileError("no front matter (the file must start with a '---' line)")
    end = next((i for i, line in enumerate(lines[1:], 1) if line.rstrip() == FENCE), None)
    if end is None:
        raise SkillFileError("the front matter is not closed by a '---' line")
    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        raise SkillFileError(f"the front matter is not valid YAML: {exc}") from exc
    if not isinstance(meta, dict):
        raise SkillFileError("the front matter is not a mapping of fields")
    return meta, "\n".join(lines[end + 1 :]).strip()


def _name(meta: Mapping[str, Any], path: Path) -> str:
    name = meta.get("name", path.stem)
    if not isinstance(name, str) or not SKILL_NAME.match(name):
        raise SkillFileError(
            f"invalid name {name!r} (lowercase letters, digits, '-' and '_', at most 64)"
        )
    return name


def _description(meta: Mapping[str, Any]) -> str:
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFileError("no description (a one-line 'description:' is required)")
    description = description.strip()
    if "\n" in description:
        raise SkillFileError("the description must be one line")
    return description


def capped(text: str, max_chars: int) -> str:
    """At most `max_chars` characters, the cut marked so the model knows something is missing."""
    if len(text) <= max_chars:
        return text
    return text[: max(max_chars - len(CUT_MARKER), 0)].rstrip() + CUT_MARKER


# --- switches ----------------------------------------------------------------------------


class SkillBook:
    """The loaded skills with their stored switches."""

    def __init__(
        self,
        engine: AsyncEngine,
        skills: Mapping[str, Skill],
        plugin_of: Callable[[str], str | None] = lambda _name: None,
    ) -> None:
        self._engine = engine
        self._skills = {name: skills[name] for name in sorted(skills)}
        # A skill declared by a function plugin is off while that plugin is switched off.
        self._plugin_of = plugin_of

    @property
    def skills(self) -> Mapping[str, Skill]:
        return self._skills

    async def state(self) -> list[SkillState]:
        settings = await load_settings(self._engine, SETTING_KIND)
        off = await self._plugins_off()
        return [
            _state(skill, settings.get(name, Setting()), self._plugin_of(name) in off)
            for name, skill in self._skills.items()
        ]

    async def _plugins_off(self) -> frozenset[str]:
        plugins = await load_settings(self._engine, PLUGIN_KIND)
        return frozenset(name for name, setting in plugins.items() if setting.enabled is False)

    async def set_enabled(self, name: str, on: bool, now: datetime) -> None:
        old = await self._setting(name)
        await self._save(name, Setting(on, old.embedded, old.overrides), now)

    async def set_embedded(self, name: str, on: bool, now: datetime) -> None:
        old = await self._setting(name)
        await self._save(name, Setting(old.enabled, on, old.overrides), now)

    async def embedded_text(self, max_chars: int = EMBEDDED_MAX_CHARS) -> str:
        """The bodies of the enabled, embedded skills, for every prompt; empty when none."""
        parts = [
            f"【技能：{s.skill.name}】\n{s.skill.body}"
            for s in await self.state()
            if s.enabled and s.embedded
        ]
        return capped("\n\n".join(parts), max_chars)

    async def listed(self) -> list[Skill]:
        """The skills the model may look up: enabled, and not already in every prompt."""
        return [s.skill for s in await self.state() if s.enabled and not s.embedded]

    async def lookup(self, name: str) -> SkillState | None:
        skill = self._skills.get(name)
        if skill is None:
            return None
        settings = await load_settings(self._engine, SETTING_KIND)
        off = await self._plugins_off()
        return _state(skill, settings.get(name, Setting()), self._plugin_of(name) in off)

    async def _setting(self, name: str) -> Setting:
        if name not in self._skills:
            raise KeyError(name)
        return (await load_settings(self._engine, SETTING_KIND)).get(name, Setting())

    async def _save(self, name: str, setting: Setting, now: datetime) -> None:
        await save_setting(self._engine, SETTING_KIND, name, setting, now)


def _state(skill: Skill, setting: Setting, plugin_off: bool = False) -> SkillState:
    # None in the store means "never switched": enabled defaults on, embedded off.
    enabled = (True if setting.enabled is None else setting.enabled) and not plugin_off
    return SkillState(skill, enabled, bool(setting.embedded))


# --- tools -------------------------------------------------------------------------------
# Descriptions name other tools as the model sees them on the wire (`.` travels as `__`).

_NO_ARGUMENTS: Mapping[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}


class ListSkillsTool(Tool):
    """The enabled skills the model may fetch; an empty list is an honest answer."""

    spec = ToolSpec(
        name="skills.list",
        description="列出可以查阅的技能说明（名字和一句话简介）。要看全文，用 skills__get。",
        parameters=_NO_ARGUMENTS,
        tags=frozenset({ToolTag.READ_ONLY}),
        domains=("general",),
        visibility=Visibility.VISIBLE,
    )

    def __init__(self, book: SkillBook) -> None:
        self._book = book

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        skills = await self._book.listed()
        return ToolOutput([{"name": s.name, "description": s.description} for s in skills])


class GetSkillContentTool(Tool):
    """The full text of one enabled skill."""

    spec = ToolSpec(
        name="skills.get",
        description="读取一个技能说明的全文（name 来自 skills__list）。",
        parameters={
            "type": "object",
            "properties": {"name": {"type": "string", "description": "技能的名字"}},
            "required": ["name"],
            "additionalProperties": False,
        },
        tags=frozenset({ToolTag.READ_ONLY}),
        domains=("general",),
        visibility=Visibility.VISIBLE,
    )

    def __init__(self, book: SkillBook) -> None:
        self._book = book

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        name = arguments.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ToolError("需要技能的名字 name")
        name = name.strip()
        # Models sometimes capitalise names; stored names are lowercase.
        state = await self._book.lookup(name.lower())
        if state is None:
            raise ToolError(f"没有叫 {name} 的技能")
        if not state.enabled:
            raise ToolError(f"技能 {name} 已关闭")
        return ToolOutput(capped(state.skill.body, GET_MAX_CHARS))


def skill_tools(book: SkillBook) -> tuple[Tool, ...]:
    """The tools the registry offers for skills."""
    return (ListSkillsTool(book), GetSkillContentTool(book))
