"""The tool loop and the switches, on a real store with a real ledger."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKey, StreamKind
from pallas.product.conversation.gate.trigger import SpeakTrigger
from pallas.product.llm.agent.toolbox import TurnToolbox
from pallas.product.llm.assembler.context import Character, ContextLine, PreparedTurn, Scene
from pallas.product.llm.tool_loop import MAX_RESULT_CHARS, ToolLoopDeps
from pallas.product.llm.tools.base import Conversation, ToolTag, Visibility
from pallas.product.llm.tools.book import EssentialToolError, ToolBook
from pallas.product.llm.tools.builtin.core import FindToolsTool
from pallas.product.llm.tools.registry import FunctionPlugin, ToolRegistry
from pallas.product.llm.tools.skills import SkillBook, load_skills
from pallas.store.capabilities import Setting, load_settings, save_setting
from pallas.store.ledger import LedgerWriter
from pallas.store.models import Event, Stream
from tests.product.llm.tools.kit import (
    BrokenTool,
    EchoTool,
    ExplodingCheckTool,
    GroupOnlyTool,
    HangingTool,
    HugeTool,
    NeedsKeyTool,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GROUP = StreamKey("qq", "10000", StreamKind.GROUP, "555")
PRIVATE = StreamKey("qq", "10000", StreamKind.PRIVATE, "42")


@dataclass
class Kit:
    engine: AsyncEngine
    ledger: LedgerWriter
    book: ToolBook
    echo: EchoTool
    stream_id: int

    async def toolbox(
        self, text: str = "随便说说", *, owner: bool = False, stream: StreamKey = GROUP
    ) -> TurnToolbox:
        conversation = Conversation(self.stream_id, stream, asker_is_owner=owner)
        line = ContextLine(7, "p7", "小明", "42", False, text, NOW, True, None, False, False)
        turn = PreparedTurn(
            turn_id=1,
            stream_id=self.stream_id,
            stream=stream,
            character=Character("牛牛", "", ""),
            scene=Scene(stream.kind, "", ("小明",)),
            lines=(line,),
            batch_ids=(7,),
            watermark=7,
            trigger=SpeakTrigger.TO_ME,
            forced=True,
        )
        return await TurnToolbox.open(ToolLoopDeps(self.book, self.ledger), turn, conversation, NOW)

    async def events(self) -> list[Event]:
        await self.ledger.flush()
        async with self.engine.connect() as conn:
            query = select(Event).where(Event.kind == "tool_called").order_by(Event.id)
            return list((await conn.execute(query)).all())


@pytest.fixture
async def kit(engine: AsyncEngine) -> AsyncIterator[Kit]:
    async with engine.begin() as conn:
        result = await conn.execute(
            insert(Stream).values(
                platform="qq", self_id="10000", kind="group", external_id="555", created_at=NOW
            )
        )
    ledger = LedgerWriter(engine)
    ledger.start()
    registry = ToolRegistry()
    book = ToolBook(registry, engine, frozenset({"reply"}))
    echo = EchoTool("test.echo")
    for tool in (
        FindToolsTool(book),
        echo,
        HangingTool("test.hang", timeout_s=0.2),
        BrokenTool("test.broken"),
        HugeTool("test.huge"),
        NeedsKeyTool("test.keyed"),
        ExplodingCheckTool("test.probe"),
        GroupOnlyTool("test.grouponly"),
        EchoTool("test.danger", tags=frozenset({ToolTag.NEEDS_CONFIRMATION})),
        EchoTool("test.later", visibility=Visibility.DEFERRED, hints=("骰子",)),
    ):
        registry.register(tool)
    registry.register_plugin(
        FunctionPlugin(
            "dice", "掷骰子", rare=(EchoTool("dice.cheat"),), common=(EchoTool("dice.roll"),)
        )
    )
    yield Kit(engine, ledger, book, echo, int(result.inserted_primary_key[0]))
    await ledger.close()


async def test_a_good_call_runs_and_is_audited(kit: Kit) -> None:
    box = await kit.toolbox()
    run = await box.run("test__echo", {"word": "哈", "times": 3})
    assert run.ok and run.data == {"echo": "哈哈哈"}
    [event] = await kit.events()
    assert (event.reason, event.turn_id, event.payload["tool"]) == ("ok", 1, "test.echo")
    assert event.payload["result_chars"] > 0 and "哈" in event.payload["arguments"]


@pytest.mark.parametrize(
    ("wire", "arguments", "outcome", "says"),
    [
        ("nope__tool", {}, "refused", "未知的功能：nope.tool"),
        ("test__echo", {}, "refused", "参数不对"),
        ("test__echo", {"word": 5}, "refused", "参数不对"),
        ("test__echo", None, "refused", "不是 JSON 对象"),
        ("test__hang", {"word": "x"}, "timeout", "超时"),
        ("test__broken", {"word": "x"}, "failed", "出错了"),
        ("test__keyed", {"word": "x"}, "refused", "未配置测试密钥"),
        ("test__probe", {"word": "x"}, "refused", "环境可用性检查失败"),
        ("test__danger", {"word": "x"}, "refused", "需要主人确认"),
        ("dice__cheat", {"word": "x"}, "refused", "请用 call"),
        ("test__later", {"word": "x"}, "refused", "tools.find"),
    ],
)
async def test_every_bad_call_ends_in_a_readable_refusal(
    kit: Kit, wire: str, arguments: dict[str, object] | None, outcome: str, says: str
) -> None:
    box = await kit.toolbox()
    run = await box.run(wire, arguments)
    assert not run.ok and run.outcome == outcome and says in run.reason
    assert says in str(run.data)
    [event] = await kit.events()
    assert event.reason == outcome and says in event.payload["refusal"]


async def test_a_huge_result_is_capped(kit: Kit) -> None:
    run = await (await kit.toolbox()).run("test__huge", {"word": "x"})
    assert run.ok and run.result_chars > 5_000_000
    assert len(str(run.data)) < MAX_RESULT_CHARS + 200


async def test_conversation_checks_and_the_owner_rule(kit: Kit) -> None:
    private = await kit.toolbox(stream=PRIVATE)
    assert "在这个会话里不可用" in (await private.run("test__grouponly", {"word": "x"})).reason
    owner = await kit.toolbox(owner=True)
    assert (await owner.run("test__danger", {"word": "x"})).ok


async def test_rare_functions_are_reached_through_call(kit: Kit) -> None:
    box = await kit.toolbox()
    assert box.call_available
    run = await box.run("call", {"name": "dice.cheat", "arguments": {"word": "六"}})
    assert run.ok and run.data == {"echo": "六"}
    text_protocol = await box.run("call", {"name": "dice.cheat", "arguments": '{"word": "一"}'})
    assert text_protocol.ok
    bad = await box.run("call", {"name": "dice.cheat", "arguments": {}})
    assert "参数不对" in bad.reason


async def test_find_activates_a_deferred_tool_for_this_and_later_turns(kit: Kit) -> None:
    box = await kit.toolbox("帮我想想")
    assert "test.later" not in {spec.name for spec in box.specs()}
    found = await box.run("tools__find", {"query": "回声 later"})
    assert "test.later" in found.activated
    assert "test.later" in {spec.name for spec in box.specs()}
    assert (await box.run("test__later", {"word": "x"})).ok
    next_turn = await kit.toolbox("再来")
    assert "test.later" in {spec.name for spec in next_turn.specs()}


async def test_switches_plugins_and_essential_tools(kit: Kit) -> None:
    await kit.book.set_enabled("test.echo", False, NOW)
    box = await kit.toolbox()
    assert "已被主人关闭" in (await box.run("test__echo", {"word": "x"})).reason
    await kit.book.set_plugin_enabled("dice", False, NOW)
    box = await kit.toolbox()
    assert "dice 已关闭" in (await box.run("dice__roll", {"word": "x"})).reason
    with pytest.raises(EssentialToolError):
        await kit.book.set_enabled("tools.find", False, NOW)
    with pytest.raises(EssentialToolError):
        await kit.book.set_enabled("reply", False, NOW)
    # A stored switch that tries anyway (an old config, a hand edit) is purged at start.
    await save_setting(kit.engine, "tool", "reply", Setting(enabled=False), NOW)
    await save_setting(kit.engine, "tool", "tools.find", Setting(enabled=False), NOW)
    assert await kit.book.purge_essential_switches(NOW) == 2
    stored = await load_settings(kit.engine, "tool")
    assert stored["reply"].enabled is None and stored["test.echo"].enabled is False


async def test_re_registering_a_plugin_keeps_the_owners_switches(kit: Kit) -> None:
    await kit.book.set_enabled("dice.roll", False, NOW)
    kit.book.registry.reload_plugin(
        FunctionPlugin("dice", "掷骰子", common=(EchoTool("dice.roll"), EchoTool("dice.sum")))
    )
    box = await kit.toolbox()
    assert "已被主人关闭" in (await box.run("dice__roll", {"word": "x"})).reason
    assert (await box.run("dice__sum", {"word": "x"})).ok


async def test_owner_overrides_apply_on_the_next_turn(kit: Kit) -> None:
    await kit.book.set_override(
        "test.later", {"visibility": "visible", "description": "主人改过的说明"}, NOW
    )
    box = await kit.toolbox()
    [spec] = [s for s in box.specs() if s.name == "test.later"]
    assert spec.description == "主人改过的说明"
    with pytest.raises(ValueError, match="override"):
        await kit.book.set_override("test.later", {"timeout": 99}, NOW)


async def test_activations_expire(kit: Kit) -> None:
    box = await kit.toolbox()
    await box.run("tools__find", {"query": "later"})
    later = await TurnToolbox.open(
        box.deps,
        box_turn(kit),
        Conversation(kit.stream_id, GROUP, asker_is_owner=False),
        NOW + timedelta(hours=1),
    )
    assert "test.later" not in {spec.name for spec in later.specs()}


def box_turn(kit: Kit) -> PreparedTurn:
    line = ContextLine(7, "p7", "小明", "42", False, "嗯", NOW, True, None, False, False)
    return PreparedTurn(
        turn_id=2,
        stream_id=kit.stream_id,
        stream=GROUP,
        character=Character("牛牛", "", ""),
        scene=Scene(StreamKind.GROUP, "", ()),
        lines=(line,),
        batch_ids=(7,),
        watermark=7,
        trigger=SpeakTrigger.TO_ME,
        forced=True,
    )


async def test_a_switched_off_plugin_takes_its_skills_with_it(kit: Kit, tmp_path: Path) -> None:
    (tmp_path / "dice-help.md").write_text(
        "---\ndescription: 骰子规矩\n---\n掷骰子要先说好面数。\n", encoding="utf-8"
    )
    kit.book.registry.register_plugin(FunctionPlugin("rules", "规矩", skills=("dice-help",)))
    skills = SkillBook(
        kit.engine, load_skills(tmp_path / "none", tmp_path), kit.book.registry.skill_plugin
    )
    assert [s.name for s in await skills.listed()] == ["dice-help"]
    await kit.book.set_plugin_enabled("rules", False, NOW)
    assert await skills.listed() == []
