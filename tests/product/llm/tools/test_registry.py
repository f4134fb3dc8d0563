"""The registry: names, wire names, plugins all-or-nothing, reload and unload."""

from __future__ import annotations

import pytest

from pallas.product.llm.tools.base import ToolSpec, ToolTag
from pallas.product.llm.tools.registry import (
    WIRE_PATTERN,
    FunctionPlugin,
    RegistryError,
    ToolRegistry,
    from_wire,
    to_wire,
)
from tests.product.llm.tools.kit import EchoTool


@pytest.mark.parametrize("name", ["web.fetch", "time.now", "a.b.c", "x1", "chat.history"])
def test_dotted_names_map_to_wire_names_and_back(name: str) -> None:
    wire = to_wire(name)
    assert WIRE_PATTERN.match(wire)
    assert from_wire(wire) == name


@pytest.mark.parametrize(
    "name", ["Web.fetch", "web..fetch", "web__fetch", "网页.抓取", "", "a" * 80]
)
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(RegistryError):
        ToolRegistry().register(EchoTool(name))


def test_a_name_is_registered_once() -> None:
    registry = ToolRegistry()
    registry.register(EchoTool("x.one"))
    with pytest.raises(RegistryError, match="already registered"):
        registry.register(EchoTool("x.one"))


@pytest.mark.parametrize(
    ("name", "tags", "read_only"),
    [
        ("files.list", frozenset(), True),
        ("web.search", frozenset(), True),
        ("notes.get", frozenset(), True),
        ("group.kick", frozenset(), False),
        ("files.list", frozenset({ToolTag.SIDE_EFFECT}), False),
        ("group.kick", frozenset({ToolTag.READ_ONLY}), True),
    ],
)
def test_read_only_is_declared_or_inferred_from_the_name(
    name: str, tags: frozenset[ToolTag], read_only: bool
) -> None:
    assert ToolSpec(name, "d", {"type": "object"}, tags=tags).read_only is read_only


def plugin(name: str = "dice", *tools: EchoTool, rare: tuple[EchoTool, ...] = ()) -> FunctionPlugin:
    return FunctionPlugin(name, "掷骰子", skills=(f"{name}-help",), common=tools, rare=rare)


def test_a_plugin_registers_all_its_members_or_none() -> None:
    registry = ToolRegistry()
    registry.register(EchoTool("dice.taken"))
    bad = plugin("dice", EchoTool("dice.roll"), EchoTool("dice.taken"))
    with pytest.raises(RegistryError, match=r"dice\.taken"):
        registry.register_plugin(bad)
    assert registry.get("dice.roll") is None and registry.plugins() == ()
    good = plugin("dice", EchoTool("dice.roll"), rare=(EchoTool("dice.cheat"),))
    registry.register_plugin(good)
    assert registry.plugin_of("dice.roll") == "dice" and registry.is_rare("dice.cheat")
    assert registry.skill_plugin("dice-help") == "dice"


def test_a_member_cannot_belong_to_two_plugins() -> None:
    registry = ToolRegistry()
    shared = EchoTool("shared.tool")
    registry.register_plugin(plugin("one", shared))
    with pytest.raises(RegistryError, match="in plugin 'one'"):
        registry.register_plugin(plugin("two", shared))
    with pytest.raises(RegistryError, match="skill"):
        registry.register_plugin(FunctionPlugin("three", "x", skills=("one-help",)))


def test_unload_withdraws_exactly_what_the_plugin_declared() -> None:
    registry = ToolRegistry()
    registry.register(EchoTool("keep.me"))
    registry.register_plugin(plugin("dice", EchoTool("dice.roll"), rare=(EchoTool("dice.cheat"),)))
    registry.unload_plugin("dice")
    assert [t.spec.name for t in registry.tools()] == ["keep.me"]
    assert not registry.is_rare("dice.cheat") and registry.skill_plugin("dice-help") is None


def test_reload_replaces_and_a_failed_reload_restores_the_old_declaration() -> None:
    registry = ToolRegistry()
    registry.register(EchoTool("other.tool"))
    registry.register_plugin(plugin("dice", EchoTool("dice.roll")))
    registry.reload_plugin(plugin("dice", EchoTool("dice.roll"), EchoTool("dice.sum")))
    assert registry.get("dice.sum") is not None
    with pytest.raises(RegistryError):
        registry.reload_plugin(plugin("dice", EchoTool("other.tool")))
    assert {t.spec.name for t in registry.tools()} == {"other.tool", "dice.roll", "dice.sum"}
