"""The console's view of the bot's tools, plugins and skills, and their switches (stored in
`capability_setting`, read by every turn's tool offer: a switch applies to the next turn)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pallas.product.llm.tools.base import Tool
from pallas.product.llm.tools.book import EssentialToolError
from pallas.product.llm.tools.toolset import ToolSetup


@dataclass(frozen=True)
class Switchable:
    kind: str  # tool / plugin / skill
    name: str
    description: str
    enabled: bool
    essential: bool = False  # cannot be switched off
    plugin: str = ""  # the plugin a tool belongs to
    missing: str = ""  # what it needs and lacks (a key, a model): on, yet it cannot work


async def inventory(tools: ToolSetup) -> list[Switchable]:
    book = tools.book
    snapshot = await book.snapshot()
    essential = book.essential_names()
    listed = [
        Switchable("plugin", p.name, p.description, _on(snapshot.plugins.get(p.name)))
        for p in book.registry.plugins()
    ]
    for tool in book.registry.tools():
        spec = tool.spec
        listed.append(
            Switchable("tool", spec.name, spec.description, _on(snapshot.tools.get(spec.name)),
                       spec.name in essential, book.registry.plugin_of(spec.name) or "",
                       _missing(tool))
        )  # fmt: skip
    for state in await tools.skills.state():
        listed.append(Switchable("skill", state.skill.name, state.skill.description, state.enabled))
    return listed


def _missing(tool: Tool) -> str:
    try:
        environment = tool.can_enable()
    except Exception:  # a probing hook must not take the page down
        return "检查不了它能不能用"
    return "" if environment.available else environment.reason or "缺少它需要的东西"


def _on(setting: object) -> bool:
    enabled = getattr(setting, "enabled", None)
    return True if enabled is None else bool(enabled)


class SwitchRefused(ValueError):
    """Why a switch was not changed (Chinese, for the owner)."""


async def switch(tools: ToolSetup, kind: str, name: str, on: bool, now: datetime) -> None:
    if kind == "skill" and name not in tools.skills.skills:
        raise SwitchRefused(f"没有叫 {name} 的技能")
    try:
        if kind == "tool":
            await tools.book.set_enabled(name, on, now)
        elif kind == "plugin":
            await tools.book.set_plugin_enabled(name, on, now)
        elif kind == "skill":
            await tools.skills.set_enabled(name, on, now)
        else:
            raise SwitchRefused(f"没有 {kind} 这一类")
    except EssentialToolError:
        raise SwitchRefused(f"{name} 是必需的工具，不能关") from None
    except KeyError:
        raise SwitchRefused(f"没有叫 {name} 的{_KINDS.get(kind, kind)}") from None


_KINDS = {"tool": "工具", "plugin": "插件", "skill": "技能"}
