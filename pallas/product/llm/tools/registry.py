"""The tool registry: every tool by its stable name, function plugins, rare functions.

Built once at start-up and passed in (no module globals). Plugin registration is
all-or-nothing; unloading withdraws exactly what the plugin declared. Switches are not held
here: they live in the store by name, so re-registering never resets them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pallas.product.llm.tools.base import NAME_PATTERN, Tool

WIRE_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
WIRE_DOT = "__"  # dotted names travel as double underscores, which names may not contain


class RegistryError(ValueError):
    """A registration that would leave the registry inconsistent; nothing was changed."""


def to_wire(name: str) -> str:
    """The name OpenAI-compatible services accept (`web.fetch` -> `web__fetch`)."""
    return name.replace(".", WIRE_DOT)


def from_wire(wire: str) -> str:
    return wire.replace(WIRE_DOT, ".")


@dataclass(frozen=True)
class FunctionPlugin:
    """A bundle with one switch: skills (by name), common functions, rare functions.

    Rare functions are only reachable through the `call` meta-function.
    """

    name: str
    description: str
    skills: tuple[str, ...] = ()
    common: tuple[Tool, ...] = ()
    rare: tuple[Tool, ...] = ()

    @property
    def members(self) -> tuple[Tool, ...]:
        return (*self.common, *self.rare)


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._plugin_of: dict[str, str] = {}
        self._skill_plugin: dict[str, str] = {}
        self._rare: set[str] = set()
        self._plugins: dict[str, FunctionPlugin] = {}

    # -- lookups -----------------------------------------------------------------------

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def tools(self) -> tuple[Tool, ...]:
        """In registration order (the order prompts list them in)."""
        return tuple(self._tools.values())

    def is_rare(self, name: str) -> bool:
        return name in self._rare

    def plugin_of(self, name: str) -> str | None:
        return self._plugin_of.get(name)

    def plugins(self) -> tuple[FunctionPlugin, ...]:
        return tuple(self._plugins.values())

    def skill_plugin(self, skill: str) -> str | None:
        return self._skill_plugin.get(skill)

    # -- registration ------------------------------------------------------------------

    def register(self, tool: Tool) -> None:
        self._check_new([tool])
        self._tools[tool.spec.name] = tool

    def register_plugin(self, plugin: FunctionPlugin) -> None:
        """All members or none."""
        if plugin.name in self._plugins:
            raise RegistryError(f"function plugin {plugin.name!r} is already registered")
        self._check_new(plugin.members)
        for skill in plugin.skills:
            owner = self._skill_plugin.get(skill)
            if owner is not None:
                raise RegistryError(f"skill {skill!r} already belongs to plugin {owner!r}")
        for tool in plugin.members:
            self._tools[tool.spec.name] = tool
            self._plugin_of[tool.spec.name] = plugin.name
        self._rare |= {tool.spec.name for tool in plugin.rare}
        self._skill_plugin |= dict.fromkeys(plugin.skills, plugin.name)
        self._plugins[plugin.name] = plugin

    def unload_plugin(self, name: str) -> FunctionPlugin:
        plugin = self._plugins.pop(name, None)
        if plugin is None:
            raise RegistryError(f"no function plugin named {name!r}")
        for tool in plugin.members:
            self._tools.pop(tool.spec.name, None)
            self._plugin_of.pop(tool.spec.name, None)
            self._rare.discard(tool.spec.name)
        for skill in plugin.skills:
            self._skill_plugin.pop(skill, None)
        return plugin

    def reload_plugin(self, plugin: FunctionPlugin) -> None:
        """Replace a plugin's declaration; on failure the previous one is restored."""
        previous = self._plugins.get(plugin.name)
        if previous is not None:
            self.unload_plugin(plugin.name)
        try:
            self.register_plugin(plugin)
        except RegistryError:
            if previous is not None:
                self.register_plugin(previous)
            raise

    def _check_new(self, tools: Iterable[Tool]) -> None:
        seen: set[str] = set()
        for tool in tools:
            name = tool.spec.name
            _check_name(name)
            if name in self._tools or name in seen:
                owner = self._plugin_of.get(name)
                where = f" (in plugin {owner!r})" if owner else ""
                raise RegistryError(f"tool {name!r} is already registered{where}")
            seen.add(name)


def _check_name(name: str) -> None:
    if not NAME_PATTERN.match(name) or WIRE_DOT in name:
        raise RegistryError(
            f"tool name {name!r}: use lowercase words joined by dots, e.g. web.fetch "
            "(letters, digits, single underscores)"
        )
    if not WIRE_PATTERN.match(to_wire(name)):
        raise RegistryError(f"tool name {name!r} is too long for the wire (64 characters)")
