"""The responder stages on a real store: they answer through the outbox, once per cause."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import Segment, SegmentKind
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery, OutboxDispatcher
from pallas.product.conversation.delivery.pacing import DeliveryPolicy
from pallas.product.conversation.ingress import Ingress, StoredChange, StoredMessage
from pallas.product.conversation.stages import StageList
from pallas.product.deterministic.responders import (
    NoticeStage,
    PokeBackStage,
    RepeatStage,
    ResponderDeps,
)
from pallas.product.settings.features import FeatureGate
from pallas.store.ledger import LedgerWriter
from pallas.store.models import Event, OutboxItem
from pallas.store.outbox import OutboxStore
from pallas.store.settings_table import SettingsTable
from pallas.store.timeline import TimelineWriter
from tests.product.conversation.delivery.test_outbox import Outlet
from tests.product.conversation.test_stages import Own, Scripted
from tests.support.inbound import BOT_ID, T0, member_change, message


@dataclass
class Scene:
    engine: AsyncEngine
    ingress: Ingress
    gate: Scripted
    deps: ResponderDeps
    ledger: LedgerWriter

    async def rows(self) -> list[tuple[str, int | None, str | None, dict]]:
        query = select(
            OutboxItem.kind, OutboxItem.turn_id, OutboxItem.idempotency_key, OutboxItem.payload
        ).order_by(OutboxItem.id)
        async with self.engine.connect() as conn:
            return [tuple(row) for row in (await conn.execute(query)).all()]  # type: ignore[misc]

    async def stage_events(self) -> list[tuple[str, str, int | None]]:
        await self.ledger.flush()
        query = select(Event.kind, Event.reason, Event.turn_id).where(Event.kind.like("stage_%"))
        async with self.engine.connect() as conn:
            return [tuple(row) for row in (await conn.execute(query.order_by(Event.id))).all()]  # type: ignore[misc]


async def nickname(self_id: str, user_id: str) -> str | None:
    return f"昵称{user_id}"


@pytest.fixture
async def scene(
    engine: AsyncEngine, writer: TimelineWriter, ledger: LedgerWriter, tmp_path: Path
) -> AsyncIterator[Scene]:
    store = OutboxStore(engine)
    dispatcher = OutboxDispatcher(store, Outlet(), ledger, DeliveryPolicy(), lambda: T0)
    ids = itertools.count(100)
    deps = ResponderDeps(
        engine=engine,
        sender=OutboxDelivery(store, dispatcher, lambda: T0),
        outbox=store,
        action_ids=lambda: next(ids),
        clock=lambda: T0,
        data_dir=tmp_path,
        names=nickname,
        features=FeatureGate(SettingsTable(engine)),
    )
    gate = Scripted("gate")
    stages = [PokeBackStage(deps), NoticeStage(deps), RepeatStage(deps), gate]
    ingress = Ingress(writer, StageList(stages, ledger, own=Own()))
    yield Scene(engine, ingress, gate, deps, ledger)


async def said(scene: Scene, user: str, text: str) -> StoredMessage:
    result = await scene.ingress.accept(message(text, user_id=user))
    assert result.stored is not None
    return result.stored


async def test_a_run_of_two_is_repeated_once_through_the_outbox(scene: Scene) -> None:
    await said(scene, "1", "草")
    second = await said(scene, "2", "草")
    await said(scene, "3", "草")  # a third voice does not start another repeat
    assert scene.gate.seen == ["草", "草"]  # the repeated line was answered by the repeater
    [row] = await scene.rows()
    assert row[:3] == ("message", 100, f"repeat:{second.message_id}")
    assert row[3]["segments"] == [{"kind": "text", "text": "草"}]
    assert await scene.stage_events() == [("stage_handled", "repeated", 100)]
    # Decided again after a crash (a new stage, an empty prefilter): nothing is queued twice.
    again = RepeatStage(scene.deps)
    assert (await again.on_message(second)).turn_id == 101
    assert len(await scene.rows()) == 1


def poke_from(user: str, seconds: int) -> object:
    return message(
        f"[戳一戳 → {BOT_ID}]",
        user_id=user,
        platform_message_id=f"poke:{user}:{seconds}",
        time=T0 + timedelta(seconds=seconds),
        mentions=(BOT_ID,),
        is_poke=True,
    )


async def test_poke_back_counts_pokes_still_in_the_outbox(scene: Scene) -> None:
    for user, second in (("7", 0), ("7", 1), ("8", 2)):
        await scene.ingress.accept(poke_from(user, second))  # type: ignore[arg-type]
    rows = await scene.rows()
    assert [(kind, payload) for kind, _, _, payload in rows] == [
        ("poke", {"user_id": "7"}),
        ("poke", {"user_id": "8"}),
    ]
    assert len(scene.gate.seen) == 3  # poking back does not keep the agent from the poke
    assert [e[:2] for e in await scene.stage_events()] == [
        ("stage_acted", "poked_back"),
        ("stage_acted", "poked_back"),
    ]


async def test_a_poke_between_members_is_not_returned(scene: Scene) -> None:
    other = message("[戳一戳 → 5]", user_id="7", mentions=("5",), is_poke=True)
    await scene.ingress.accept(other)
    assert await scene.rows() == [] and scene.gate.seen == ["[戳一戳 → 5]"]


async def test_a_welcome_is_queued_once_per_join(scene: Scene) -> None:
    notices = {"500": {"welcome": "欢迎 {at}（{name}）", "farewell": True}}
    (scene.deps.data_dir / "notices.json").write_text(json.dumps(notices), encoding="utf-8")
    join = member_change("321", joined=True)
    await scene.ingress.accept(join)
    await scene.ingress.accept(join)  # NapCat delivered the notice twice
    leave = replace(member_change("322", joined=False), sub_type="leave")
    await scene.ingress.accept(leave)
    rows = await scene.rows()
    assert [(kind, key) for kind, _, key, _ in rows] == [
        ("message", f"welcome:1:321:{int(T0.timestamp())}"),
        ("message", f"farewell:1:322:{int(T0.timestamp())}"),
    ]
    assert [Segment.from_json(s) for s in rows[0][3]["segments"]] == [
        Segment(SegmentKind.TEXT, text="欢迎 "),
        Segment(SegmentKind.AT, text="@昵称321", target="321"),
        Segment(SegmentKind.TEXT, text="（昵称321）"),
    ]


async def test_a_slow_name_lookup_falls_back_to_the_number(scene: Scene) -> None:
    (scene.deps.data_dir / "notices.json").write_text('{"500": {"welcome": "{name} 来了"}}')

    async def slow(self_id: str, user_id: str) -> str | None:
        await asyncio.sleep(5)
        return "太慢"

    scene.deps.names = slow
    stage = NoticeStage(scene.deps, lookup_timeout_s=0.01)
    seen = await said(scene, "9", "有人吗")  # the group is known to the store
    stored = StoredChange(seen.stream_id, None, member_change("333", joined=True))
    result = await stage.on_member_change(stored)
    assert result.reason == "welcome"
    [(_, _, _, payload)] = await scene.rows()
    assert payload["text"] == "333 来了"


async def switch(table: SettingsTable, section: str, values: dict[str, object]) -> None:
    """What the console's settings page stores for the group (stream 1, group 500), through
    the one table the stages read (its cache learns every write)."""
    await table.save(section, "1", values, T0)


async def test_repeat_switched_off_for_the_group_repeats_nothing(scene: Scene) -> None:
    await said(scene, "1", "先占个座")  # the group's stream exists from here on
    table = SettingsTable(scene.engine)
    scene.deps.features = FeatureGate(table)
    await switch(table, "features", {"repeat": False})
    await said(scene, "1", "草")
    await said(scene, "2", "草")
    assert scene.gate.seen == ["先占个座", "草", "草"]  # both went on to the gate
    assert await scene.rows() == []


async def test_stored_notices_win_over_the_file_and_the_switch_stops_them(scene: Scene) -> None:
    file = {"500": {"welcome": "文件里的欢迎 {name}"}}
    (scene.deps.data_dir / "notices.json").write_text(json.dumps(file), encoding="utf-8")
    await said(scene, "1", "在吗")
    table = SettingsTable(scene.engine)
    scene.deps.features = FeatureGate(table)
    await switch(table, "notices", {"welcome": True, "welcome_text": "欢迎 {name} 来玩"})
    await scene.ingress.accept(member_change("321", joined=True))
    [row] = await scene.rows()
    assert row[3]["segments"] == [{"kind": "text", "text": "欢迎 昵称321 来玩"}]
    await switch(table, "features", {"notices": False})
    await scene.ingress.accept(replace(member_change("322", joined=True), time=T0))
    assert len(await scene.rows()) == 1  # switched off: nobody else is greeted
