"""Which tools a turn offers (pure)."""

from __future__ import annotations

import pytest

from pallas.product.llm.assembler.tools import intent_domains, select_tools
from pallas.product.llm.tools.base import Availability, ToolTag, Visibility
from pallas.product.llm.tools.book import Candidate
from tests.product.llm.tools.kit import EchoTool

D = Visibility.DEFERRED


def cand(
    name: str,
    *,
    visibility: Visibility = Visibility.VISIBLE,
    domains: tuple[str, ...] = ("general",),
    hints: tuple[str, ...] = (),
    available: bool = True,
    rare: bool = False,
    tags: frozenset[ToolTag] = frozenset(),
) -> Candidate:
    spec = EchoTool(name, visibility=visibility, domains=domains, hints=hints, tags=tags).spec
    avail = Availability() if available else Availability.no("关了")
    return Candidate(spec, avail, rare, None)


FIND = cand("tools.find")
TIME = cand("time.now", domains=("time",))
HISTORY = cand("chat.history")
SEARCH = cand("web.search", domains=("web",))
FETCH = cand("web.fetch", visibility=D, domains=("web",), hints=("链接", "http"))
KICK = cand("group.kick", visibility=D, domains=("admin",), tags=frozenset({ToolTag.SIDE_EFFECT}))
ALL = [FIND, TIME, HISTORY, SEARCH, FETCH, KICK]


def names(
    text: str, activated: frozenset[str] = frozenset(), tools: list[Candidate] = ALL
) -> list[str]:
    return [spec.name for spec in select_tools(tools, text, activated).tools]


def test_visible_tools_come_with_their_domain() -> None:
    assert names("晚饭吃啥好呢") == ["tools.find", "chat.history"]
    assert names("现在几点了") == ["tools.find", "time.now", "chat.history"]
    assert names("帮我搜一下天气") == ["tools.find", "chat.history", "web.search"]


def test_deferred_tools_need_their_hints_or_an_activation() -> None:
    assert "web.fetch" not in names("看看这个")
    assert "web.fetch" in names("看看这个链接 http://x")
    assert "web.fetch" in names("看看这个", activated=frozenset({"web.fetch"}))


@pytest.mark.parametrize("text", ["你会啥", "你都能干什么", "有哪些功能", "你能做什么"])
def test_inventory_talk_brings_find_and_the_read_only_tools(text: str) -> None:
    offer = select_tools(ALL, text, frozenset())
    offered = [spec.name for spec in offer.tools]
    assert offer.inventory
    assert offered[0] == "tools.find"
    assert {"time.now", "web.search", "web.fetch"} <= set(offered)
    assert "group.kick" not in offered  # not read-only: discovery does not lift it


def test_unavailable_and_rare_tools_are_never_offered_directly() -> None:
    tools = [
        FIND,
        cand("time.now", domains=("time",), available=False),
        cand("dice.cheat", rare=True),
    ]
    offer = select_tools(tools, "几点了", frozenset())
    assert [s.name for s in offer.tools] == ["tools.find"]
    assert offer.call_available


def test_find_is_left_out_when_there_is_nothing_to_find() -> None:
    assert names("你好", tools=[FIND, HISTORY]) == ["chat.history"]


def test_domains() -> None:
    assert intent_domains("帮我查一下新闻") == {"general", "web"}
    assert intent_domains("随便聊聊") == {"general"}
