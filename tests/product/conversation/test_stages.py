"""The stage list through real ingress and a real store: order, verdicts, audit, failures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from loguru import logger
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import MemberChange
from pallas.product.conversation.ingress import (
    CONTINUE,
    Ingress,
    IngressOutcome,
    StageResult,
    StoredChange,
    StoredMessage,
    Verdict,
)
from pallas.product.conversation.silence import BlockedUsers, SilenceStage
from pallas.product.conversation.stages import StageList
from pallas.store import kernel_state
from pallas.store.ledger import LedgerWriter
from pallas.store.models import Event, Message
from pallas.store.timeline import TimelineWriter
from tests.support.inbound import message

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


class Scripted:
    """A stage that answers from a table of texts and notes every message it saw."""

    def __init__(
        self, name: str, answers: dict[str, StageResult] | None = None, *, explodes: bool = False
    ) -> None:
        self.name = name
        self.answers = answers or {}
        self.explodes = explodes  # on the text 炸
        self.seen: list[str] = []

    async def on_message(self, stored: StoredMessage) -> StageResult:
        self.seen.append(stored.message.text)
        if self.explodes and stored.message.text == "炸":
            raise RuntimeError("stage exploded")
        return self.answers.get(stored.message.text, CONTINUE)


class Own:
    def __init__(self) -> None:
        self.seen: list[int] = []

    async def on_own_message(self, stored: StoredMessage) -> None:
        self.seen.append(stored.message_id)


async def events(engine: AsyncEngine) -> list[tuple[str, int | None, str, str]]:
    """The stage events (ingress writes one `inbound` event per message besides)."""
    query = (
        select(Event.kind, Event.message_id, Event.reason, Event.payload)
        .where(Event.kind.like("stage_%"))
        .order_by(Event.id)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [(r.kind, r.message_id, r.reason, r.payload.get("stage", "")) for r in rows]


async def suppressed_flags(engine: AsyncEngine) -> dict[str, bool]:
    async with engine.connect() as conn:
        rows = (await conn.execute(select(Message.text, Message.suppressed))).all()
    return {r.text: bool(r.suppressed) for r in rows}


def stage_list(ledger: LedgerWriter, *stages: Scripted | SilenceStage) -> StageList:
    return StageList(stages, ledger, own=Own())


async def test_stages_run_in_order_and_stop_at_the_first_that_decides(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> None:
    first = Scripted("first", {"静": StageResult(Verdict.SUPPRESSED, "test_policy")})
    second = Scripted("second", {"答": StageResult(Verdict.HANDLED, "answered")})
    last = Scripted("last")
    stages = stage_list(ledger, first, second, last)
    assert stages.order == ("first", "second", "last")
    ingress = Ingress(writer, stages)
    outcomes = [
        (await ingress.accept(message(text, platform_message_id=str(i)))).outcome
        for i, text in enumerate(["静", "答", "过"])
    ]
    await ledger.flush()
    assert outcomes == [IngressOutcome.SUPPRESSED, IngressOutcome.ACCEPTED, IngressOutcome.ACCEPTED]
    assert (first.seen, second.seen, last.seen) == (["静", "答", "过"], ["答", "过"], ["过"])
    assert await suppressed_flags(engine) == {"静": True, "答": False, "过": False}
    recorded = [(kind, reason, stage) for kind, _, reason, stage in await events(engine)]
    assert recorded == [
        ("stage_suppressed", "test_policy", "first"),
        ("stage_handled", "answered", "second"),
    ]


async def test_a_suppressed_message_is_not_for_other_plugins_and_never_decided_again(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> None:
    silence = SilenceStage([BlockedUsers(["77"])], clock=lambda: NOW)
    gate = Scripted("gate")
    ingress = Ingress(writer, stage_list(ledger, silence, gate))
    blocked = await ingress.accept(message("我被屏蔽了", user_id="77", time=NOW))
    other = await ingress.accept(message("我没有", user_id="78", time=NOW))
    assert not blocked.should_continue and other.should_continue
    assert gate.seen == ["我没有"]
    await ledger.flush()
    # Start-up re-decides messages with no decision: the silenced one has its decision.
    undecided = await kernel_state.ungated_messages(engine, NOW - timedelta(hours=1))
    assert [row.message.text for row in undecided] == ["我没有"]


async def test_a_failing_stage_is_logged_audited_and_skipped(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> None:
    broken, after = Scripted("broken", explodes=True), Scripted("after")
    ingress = Ingress(writer, stage_list(ledger, broken, after))
    lines: list[str] = []
    sink = logger.add(lines.append, level="ERROR", format="{message}")
    try:
        result = await ingress.accept(message("炸"))
        following = await ingress.accept(message("下一条", platform_message_id="2"))
    finally:
        logger.remove(sink)
    await ledger.flush()
    assert result.outcome is IngressOutcome.ACCEPTED and result.stored is not None
    assert following.outcome is IngressOutcome.ACCEPTED
    assert after.seen == ["炸", "下一条"]
    assert len(lines) == 1 and "stage broken failed" in lines[0], lines
    [(kind, message_id, reason, stage)] = await events(engine)
    assert (kind, message_id, stage) == ("stage_failed", result.stored.message_id, "broken")
    assert "stage exploded" in reason


async def test_own_messages_skip_the_stages(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> None:
    only = Scripted("only")
    own = Own()
    ingress = Ingress(writer, StageList([only], ledger, own=own))
    result = await ingress.accept(message("我说的", user_id="10000", from_bot=True))
    assert result.outcome is IngressOutcome.RECORDED and result.stored is not None
    assert only.seen == [] and own.seen == [result.stored.message_id]


async def test_the_declared_order_holds_whatever_order_stages_register_in(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> None:
    gate = Scripted("gate")
    stages = StageList([gate], ledger, own=Own(), order=("silence", "repeat", "poke", "gate"))
    stages.register(Scripted("poke"))
    stages.register(Scripted("repeat"))  # loaded later, runs earlier: its slot says so
    assert stages.order == ("repeat", "poke", "gate")
    try:
        stages.register(Scripted("elsewhere"))
    except ValueError as exc:
        assert "has no slot" in str(exc)
    else:
        raise AssertionError("a stage without a slot was accepted")
    try:
        stages.register(Scripted("poke"))
    except ValueError as exc:
        assert "twice" in str(exc)
    else:
        raise AssertionError("a stage registered twice was accepted")


async def test_a_stage_that_acts_and_continues_is_audited_and_the_next_one_still_sees_it(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> None:
    acts = Scripted("acts", {"戳": StageResult(Verdict.CONTINUE, "poked_back", turn_id=41)})
    after = Scripted("after")
    ingress = Ingress(writer, stage_list(ledger, acts, after))
    result = await ingress.accept(message("戳"))
    await ledger.flush()
    assert result.outcome is IngressOutcome.ACCEPTED and after.seen == ["戳"]
    assert result.stored is not None
    async with engine.connect() as conn:
        query = select(Event.reason, Event.turn_id, Event.message_id)
        rows = (await conn.execute(query.where(Event.kind == "stage_acted"))).all()
    assert [tuple(row) for row in rows] == [
        (
            "poked_back",
            41,
            result.stored.message_id,
        )
    ]
    # Acting is not deciding: start-up still hands the message to the stages after it.
    undecided = await kernel_state.ungated_messages(engine, NOW - timedelta(days=3650))
    assert [row.message.text for row in undecided] == ["戳"]


class Greeter:
    name = "greeter"

    def __init__(self, *, explodes: bool = False) -> None:
        self.changes: list[tuple[str, bool]] = []
        self.explodes = explodes

    async def on_message(self, stored: StoredMessage) -> StageResult:
        return CONTINUE

    async def on_member_change(self, stored: StoredChange) -> StageResult:
        if self.explodes:
            raise RuntimeError("greeter exploded")
        self.changes.append((stored.change.user_id, stored.change.joined))
        return StageResult(Verdict.CONTINUE, "welcome", turn_id=7)


async def test_member_changes_reach_the_stages_that_take_them_once_recorded(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter
) -> None:
    broken, greeter, plain = Greeter(explodes=True), Greeter(), Scripted("plain")
    broken.name = "broken"
    ingress = Ingress(writer, stage_list(ledger, broken, greeter, plain))  # type: ignore[arg-type]
    change = MemberChange(message("x").stream, "321", "321", joined=True, time=NOW)
    result = await ingress.accept(change)
    await ledger.flush()
    assert result.outcome is IngressOutcome.RECORDED
    assert greeter.changes == [("321", True)]  # the failing stage before it changed nothing
    async with engine.connect() as conn:
        kinds = (await conn.execute(select(Event.kind, Event.reason, Event.turn_id))).all()
    assert [tuple(k) for k in kinds] == [("member_joined", "", None), ("stage_acted", "welcome", 7)]
