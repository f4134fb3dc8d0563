"""Which tools may run: manual switch ∧ environment ∧ conversation, and owner overrides.

Switches and overrides are read from the store once per turn (`snapshot`), so an owner's
change applies on the next turn. Essential tools (the terminal actions, `tools.find`) can
never be switched off; a stored switch that tries is purged at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.llm.tools.base import Availability, Conversation, Tool, ToolSpec, Visibility
from pallas.product.llm.tools.registry import ToolRegistry
from pallas.store.capabilities import Setting, clear_enabled, load_settings, save_setting

TOOL, PLUGIN = "tool", "plugin"
SWITCHED_OFF = "已被主人关闭"
CHECK_FAILED = "环境可用性检查失败"
NOT_HERE = "在这个会话里不可用"


class EssentialToolError(ValueError):
    """An essential tool cannot be switched off."""


@dataclass(frozen=True)
class Candidate:
    """A tool as this turn sees it: its effective spec and whether it may run."""

    spec: ToolSpec
    availability: Availability
    rare: bool
    plugin: str | None


@dataclass(frozen=True)
class Snapshot:
    tools: Mapping[str, Setting]
    plugins: Mapping[str, Setting]


class ToolBook:
    def __init__(
        self, registry: ToolRegistry, engine: AsyncEngine, essential: frozenset[str]
    ) -> None:
        self.registry = registry
        self.engine = engine
        self._essential = essential  # names outside the registry (the terminal actions)

    def essential_names(self) -> frozenset[str]:
        return self._essential | {t.spec.name for t in self.registry.tools() if t.spec.essential}

    def is_essential(self, name: str) -> bool:
        return name in self.essential_names()

    async def purge_essential_switches(self, now: datetime) -> int:
        names = sorted(self.essential_names())
        purged = await clear_enabled(self.engine, TOOL, names, now)
        if purged:
            logger.warning("ignored {} stored switch(es) turning essential tools off", purged)
        return purged

    async def snapshot(self) -> Snapshot:
        return Snapshot(
            await load_settings(self.engine, TOOL), await load_settings(self.engine, PLUGIN)
        )

    async def set_enabled(self, name: str, on: bool, now: datetime) -> None:
        if self.registry.get(name) is None and name not in self._essential:
            raise KeyError(name)
        if not on and self.is_essential(name):
            raise EssentialToolError(f"{name} is essential and cannot be switched off")
        old = (await load_settings(self.engine, TOOL)).get(name, Setting())
        await save_setting(self.engine, TOOL, name, replace(old, enabled=on), now)

    async def set_plugin_enabled(self, name: str, on: bool, now: datetime) -> None:
        if name not in {p.name for p in self.registry.plugins()}:
            raise KeyError(name)
        old = (await load_settings(self.engine, PLUGIN)).get(name, Setting())
        await save_setting(self.engine, PLUGIN, name, replace(old, enabled=on), now)

    async def set_override(self, name: str, overrides: Mapping[str, Any], now: datetime) -> None:
        """Owner's description / hints / visibility for one tool (validated here)."""
        if self.registry.get(name) is None:
            raise KeyError(name)
        checked = validate_overrides(overrides)
        old = (await load_settings(self.engine, TOOL)).get(name, Setting())
        await save_setting(self.engine, TOOL, name, replace(old, overrides=checked), now)

    def candidates(self, snapshot: Snapshot, conversation: Conversation) -> list[Candidate]:
        essential = self.essential_names()  # once per turn, not once per tool
        return [
            self.candidate(tool, snapshot, conversation, essential)
            for tool in self.registry.tools()
        ]

    def candidate(
        self,
        tool: Tool,
        snapshot: Snapshot,
        conversation: Conversation,
        essential: frozenset[str] | None = None,
    ) -> Candidate:
        name = tool.spec.name
        setting = snapshot.tools.get(name, Setting())
        plugin = self.registry.plugin_of(name)
        switchable = name not in (self.essential_names() if essential is None else essential)
        return Candidate(
            spec=effective_spec(tool.spec, setting.overrides),
            availability=availability(tool, setting, snapshot, plugin, conversation, switchable),
            rare=self.registry.is_rare(name),
            plugin=plugin,
        )


def availability(
    tool: Tool,
    setting: Setting,
    snapshot: Snapshot,
    plugin: str | None,
    conversation: Conversation,
    switchable: bool,
) -> Availability:
    if switchable:  # essential tools ignore the switches
        if setting.enabled is False:
            return Availability.no(SWITCHED_OFF)
        if plugin is not None and snapshot.plugins.get(plugin, Setting()).enabled is False:
            return Availability.no(f"所属功能插件 {plugin} 已关闭")
    try:
        environment = tool.can_enable()
    except Exception as exc:  # a probing hook must not take the turn down
        logger.warning("can_enable of {} raised {!r}", tool.spec.name, exc)
        return Availability.no(CHECK_FAILED)
    if not environment.available:
        return Availability.no(environment.reason or CHECK_FAILED)
    try:
        here = tool.is_available_for(conversation)
    except Exception as exc:
        logger.warning("is_available_for of {} raised {!r}", tool.spec.name, exc)
        here = False
    return Availability() if here else Availability.no(NOT_HERE)


def validate_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    checked: dict[str, Any] = {}
    for key, value in overrides.items():
        if key == "description" and isinstance(value, str) and value.strip():
            checked[key] = value.strip()[:500]
        elif key == "hints" and isinstance(value, list | tuple):
            checked[key] = [str(v).strip()[:40] for v in value if str(v).strip()][:30]
        elif key == "visibility" and value in {v.value for v in Visibility}:
            checked[key] = value
        else:
            raise ValueError(f"override {key!r}: not a valid description, hints or visibility")
    return checked


def effective_spec(spec: ToolSpec, overrides: Mapping[str, Any]) -> ToolSpec:
    """The declared spec with the owner's overrides applied; bad stored values are ignored."""
    try:
        checked = validate_overrides(overrides)
    except ValueError as exc:
        logger.warning("override of {} ignored: {}", spec.name, exc)
        return spec
    return replace(
        spec,
        description=checked.get("description", spec.description),
        hints=tuple(checked.get("hints", spec.hints)),
        visibility=Visibility(checked.get("visibility", spec.visibility)),
    )
