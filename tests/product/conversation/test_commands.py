"""The commands stage on a real store: parsing, who may, the answers, refusals and floods."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import Origin
from pallas.core.inbound import Segment, SegmentKind
from pallas.product.conversation.commands import CommandCall, CommandStage, parse_command
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery, OutboxDispatcher
from pallas.product.conversation.delivery.pacing import DeliveryPolicy
from pallas.product.conversation.ingress import Ingress, IngressOutcome
from pallas.product.conversation.stages import StageList
from pallas.product.conversation.why import ORIGIN_NAMES, USAGE, WhyCommand, describe_path
from pallas.store.audit_trail import MessagePath, OutboxState, TrailEvent, TurnTrace
from pallas.store.ledger import LedgerWriter
from pallas.store.models import OutboxItem
from pallas.store.outbox import OutboxStore
from pallas.store.timeline import TimelineWriter
from tests.product.conversation.delivery.test_outbox import Outlet
from tests.product.conversation.test_stages import Own, Scripted
from tests.support.inbound import BOT_ID, T0, message

OWNER = "1001"


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("/why", ("why", "")),
        ("  /why  这条 ", ("why", "这条")),
        ("/help", ("help", "")),
        ("/whynot", None),
        ("why", None),
        ("／why", ("why", "")),  # a full-width slash is the same slash
        ("/why.这条", ("why", "这条")),  # COMMAND_SEP between the name and what follows
        ("/why   这条　消息", ("why", "这条 消息")),  # extra and full-width spaces
        ("/", None),
        ("看看 /why", None),
    ],
)
def test_only_a_known_name_after_the_slash_is_a_command(
    text: str, parsed: tuple[str, str] | None
) -> None:
    assert parse_command(text, ["why", "help"]) == parsed


class Boom:
    name = "boom"
    summary = "总是出错"

    async def run(self, call: CommandCall) -> str:
        raise RuntimeError("exploded")


@dataclass
class Scene:
    engine: AsyncEngine
    ingress: Ingress
    gate: Scripted
    ledger: LedgerWriter

    async def answers(self) -> list[str]:
        query = select(OutboxItem.payload).order_by(OutboxItem.id)
        async with self.engine.connect() as conn:
            return [row.payload["text"] for row in (await conn.execute(query)).all()]


@pytest.fixture
async def scene(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> AsyncIterator[Scene]:
    store = OutboxStore(engine)
    dispatcher = OutboxDispatcher(store, Outlet(), ledger, DeliveryPolicy(), lambda: T0)
    ids = itertools.count(500)
    sender = OutboxDelivery(store, dispatcher, lambda: T0)
    commands = CommandStage([WhyCommand(engine), Boom()], [OWNER], sender, lambda: next(ids))
    gate = Scripted("gate")
    yield Scene(engine, Ingress(writer, StageList([commands, gate], ledger, Own())), gate, ledger)


async def test_an_owners_command_is_answered_and_goes_no_further(scene: Scene) -> None:
    result = await scene.ingress.accept(message("/help", user_id=OWNER))
    assert result.outcome is IngressOutcome.ACCEPTED and scene.gate.seen == []
    [answer] = await scene.answers()
    assert answer.splitlines() == [
        "你能用的命令：",
        "/why：引用一条消息，看它经过了哪些环节、为什么回或不回",
        "/boom：总是出错",
        "/help（/帮助）：列出你在这里能用的命令",
    ]


async def test_a_member_gets_their_own_help_and_one_refusal(scene: Scene) -> None:
    await scene.ingress.accept(message("/帮助", user_id="2002"))
    for _ in range(3):
        await scene.ingress.accept(message("/why", user_id="2002"))
    assert scene.gate.seen == []  # commands, answered or not, never reach the gate
    help_, refused = await scene.answers()
    assert help_.splitlines() == ["你能用的命令：", "/help（/帮助）：列出你在这里能用的命令"]
    assert refused == "/why 只有主人能用。"  # said once, not three times


async def test_unknown_words_and_pokes_are_ordinary_chat(scene: Scene) -> None:
    await scene.ingress.accept(message("/unknown", user_id=OWNER))
    await scene.ingress.accept(message("[戳一戳]", user_id=OWNER, is_poke=True))
    assert scene.gate.seen == ["/unknown", "[戳一戳]"]
    assert await scene.answers() == []


async def test_the_same_command_thirty_times_gets_a_few_answers(scene: Scene) -> None:
    for _ in range(30):
        await scene.ingress.accept(message("/help", user_id=OWNER))
    assert len(await scene.answers()) == 3 and scene.gate.seen == []


async def test_a_broken_command_says_so(scene: Scene) -> None:
    await scene.ingress.accept(message("/boom", user_id=OWNER))
    assert await scene.answers() == ["命令 /boom 出错了：RuntimeError"]


async def test_why_reads_the_quoted_messages_trail(scene: Scene) -> None:
    asked = await scene.ingress.accept(message("大家好", platform_message_id="4242"))
    assert asked.stored is not None
    await scene.ledger.flush()
    await scene.ingress.accept(message("/why", user_id=OWNER, reply_to="4242"))
    await scene.ingress.accept(message("/why", user_id=OWNER))
    await scene.ingress.accept(message("/why", user_id=OWNER, reply_to="999999"))
    why, usage, unknown = await scene.answers()
    assert why.splitlines()[0] == f"消息 #{asked.stored.message_id}：还没有决定：可能正在处理。"
    assert usage == USAGE
    assert unknown.startswith("这条消息不在记录里")


async def test_a_leading_at_of_the_bot_does_not_hide_the_command(scene: Scene) -> None:
    msg = message("/help", user_id=OWNER, mentions=(BOT_ID,))
    at = Segment(SegmentKind.AT, text="@牛牛", target=BOT_ID)
    spaced = Segment(SegmentKind.TEXT, text=" /help")
    await scene.ingress.accept(
        type(msg)(**{**vars(msg), "segments": (at, spaced), "text": "@牛牛 /help"})
    )
    assert scene.gate.seen == [] and len(await scene.answers()) == 1


def test_the_trail_reads_as_steps_with_their_reason_words() -> None:
    def event(kind: str, reason: str = "", turn_id: int | None = None) -> TrailEvent:
        return TrailEvent(kind, reason, T0, turn_id, 7, {})

    dropped = MessagePath(
        7,
        "今天吃什么",
        False,
        (event("inbound"), event("gate_dropped", "attention_filtered")),
        None,
    )
    assert describe_path(dropped).splitlines() == [
        "消息 #7：没理：这句话没有叫我，群里也没在跟我说话。",
        "- 门控没有接：这句话没有叫我，群里也没在跟我说话",
    ]
    turn = TurnTrace(
        12,
        (event("turn_started", "mentioned", 12), event("agent_decided", "reply", 12)),
        (
            OutboxState(1, "message", "sent", 0, "9", "", "agent_reply"),
            OutboxState(2, "message", "failed", 5, None, "x", "agent_reply"),
        ),
    )
    answered = MessagePath(7, "@牛牛", True, (event("gate_passed", "mentioned"),), turn)
    assert describe_path(answered).splitlines() == [
        "消息 #7：静默了：记下了，但没有任何回应（可能我在生气，或者说话的人被拉黑了）。",
        "- 门控放行：被 @ 了",
        "回合/动作 12：",
        "  - 开始一个回合：被 @ 了",
        "  - 决定：回复",
        "  发出 1/2 条（聊天回复）",
    ]
    replied = MessagePath(7, "@牛牛", False, (event("gate_passed", "mentioned"),), turn)
    assert describe_path(replied).splitlines()[0] == "消息 #7：回了：被 @ 了；送达 1/2 条。"
    answer = TurnTrace(13, (), (OutboxState(3, "message", "sent", 0, "10", "", "command"),))
    handled = (event("stage_handled", "command_帮助", 13),)
    assert describe_path(MessagePath(8, "/帮助", False, handled, None, (answer,))).splitlines() == [
        "消息 #8：直接回应了：回答了命令 /帮助。",
        "- 已由其它环节回应：回答了命令 /帮助",
        "回合/动作 13：",
        "  发出 1/1 条（命令回答）",
    ]


def test_every_origin_has_a_name_in_the_trail() -> None:
    assert set(ORIGIN_NAMES) == set(Origin)
    assert all(ORIGIN_NAMES.values())
