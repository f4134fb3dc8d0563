"""Every outbox row says which part of the bot it comes from, and the bot's recorded message
keeps it, whether the send's own record or the platform's echo is stored first; the gate's
view, also rebuilt from the store after a restart, counts only the bot taking part in the
talk (docs/gating.md, the natural window)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from pallas.core.actions import Origin, Poke, counts_as_speaking
from pallas.core.inbound import Segment, SegmentKind, StreamKey
from pallas.platform.onebot.send import own_message, own_poke
from pallas.product.conversation.delivery.contract import OutgoingMessage
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery
from pallas.product.conversation.gate.activity import Sighting, StreamActivity
from pallas.product.conversation.gate.activity_book import ActivityBook
from pallas.product.conversation.gate.facts import Asker, MessageFacts, gate_request
from pallas.product.conversation.gate.policy import GatePolicy
from pallas.product.conversation.ingress import Ingress
from pallas.store.models import Message
from tests.product.conversation.delivery.test_outbox import POLICY, Kit, Outlet, drained
from tests.product.conversation.delivery.test_outbox import kit as kit  # the fixture
from tests.support.inbound import BOT_ID, group
from tests.support.waiting import until_async

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


@dataclass
class EchoingOutlet(Outlet):
    """Reports each sent message through the ingress, as NapCat does: its echo `before`
    the send's answer, or the bot's own record of it after."""

    ingress: Ingress | None = None
    echo_first: bool = True
    ids: list[str] = field(default_factory=list)

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None:
        assert self.ingress is not None
        platform_id = str(9_000 + len(self.ids))
        self.ids.append(platform_id)
        report = own_message(stream, tuple(segments), platform_id, datetime.now(UTC))
        await self.ingress.accept(report)  # the echo, or the record: whichever is stored first
        if not self.echo_first:  # the other one arrives too, and is a duplicate
            await self.ingress.accept(report)
        return platform_id


@dataclass
class LateEchoOutlet(EchoingOutlet):
    """The platform sends, but its answer never comes: the echo arrives after the timeout."""

    late: list[asyncio.Task[object]] = field(default_factory=list)

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None:
        assert self.ingress is not None
        report = own_message(stream, tuple(segments), "late-1", datetime.now(UTC))
        self.late.append(asyncio.create_task(_after(0.2, self.ingress.accept(report))))
        await asyncio.sleep(3600)  # cut by the send timeout
        return None

    async def poke(self, stream: StreamKey, user_id: str) -> bool:
        assert self.ingress is not None
        await self.ingress.accept(own_poke(stream, user_id, datetime.now(UTC)))
        return True


async def _after(delay_s: float, work: Awaitable[object]) -> object:
    await asyncio.sleep(delay_s)
    return await work


async def _origins(kit: Kit) -> dict[str, str | None]:
    async with kit.engine.connect() as conn:
        rows = await conn.execute(
            select(Message.platform_message_id, Message.origin).where(Message.from_bot)
        )
        return {row.platform_message_id: row.origin for row in rows}


async def test_a_late_echo_and_a_poke_back_keep_their_rows_origins(kit: Kit) -> None:
    outlet = LateEchoOutlet(ingress=Ingress(kit.timeline))
    kit.outlet = outlet
    policy = replace(POLICY, send_timeout_s=0.1, backoff_base_s=0.5, backoff_max_s=0.5)
    dispatcher = kit.start(policy)
    outlet.ingress.plug_origins(dispatcher.in_flight.origin_of)  # type: ignore[union-attr]
    delivery = OutboxDelivery(kit.store, dispatcher, kit.clock)
    sid = await kit.stream_id("g-late")
    words = (Segment(SegmentKind.TEXT, text="欢迎新人"),)
    await delivery.send(OutgoingMessage(8, sid, words, origin=Origin.RESPONDER))
    await until_async(lambda: _has(kit, "late-1"))
    await drained(kit)  # the echo that came during the backoff confirmed the row: no resend
    assert len(outlet.late) == 1
    other = await kit.stream_id("g-poke")
    await delivery.act(9, other, Poke("42"), origin=Origin.RESPONDER)
    await drained(kit)
    origins = await _origins(kit)
    assert origins["late-1"] == "responder"
    assert [o for pid, o in origins.items() if pid.startswith("poke:")] == ["responder"]
    assert dispatcher.in_flight.origin_of(group("g-late")) is None  # settled: nothing held


async def _has(kit: Kit, platform_id: str) -> bool:
    return platform_id in await _origins(kit)


async def _sent_origin(kit: Kit, *, echo_first: bool) -> str | None:
    outlet = EchoingOutlet(ingress=Ingress(kit.timeline), echo_first=echo_first)
    kit.outlet = outlet
    dispatcher = kit.start()
    outlet.ingress.plug_origins(dispatcher.in_flight.origin_of)  # type: ignore[union-attr]
    delivery = OutboxDelivery(kit.store, dispatcher, kit.clock)
    sid = await kit.stream_id("g-origin")
    words = (Segment(SegmentKind.TEXT, text="/帮助 的回答"),)
    await delivery.send(OutgoingMessage(7, sid, words, origin=Origin.COMMAND))
    await drained(kit)
    query = select(Message.origin).where(Message.platform_message_id == outlet.ids[0])
    async with kit.engine.connect() as conn:
        return (await conn.execute(query)).scalar()


async def test_the_echo_stored_first_keeps_the_rows_origin(kit: Kit) -> None:
    assert await _sent_origin(kit, echo_first=True) == "command"


async def test_the_sends_own_record_keeps_the_rows_origin(kit: Kit) -> None:
    assert await _sent_origin(kit, echo_first=False) == "command"


async def test_a_message_the_outbox_did_not_send_has_no_origin_and_counts(kit: Kit) -> None:
    ingress = Ingress(kit.timeline)
    kit.start()
    assert kit.dispatcher is not None
    ingress.plug_origins(kit.dispatcher.in_flight.origin_of)
    # Typed by hand on a phone logged in to the bot's account: nothing was in flight.
    await ingress.accept(own_message(group("g-hand"), (), "by-hand", NOW))
    async with kit.engine.connect() as conn:
        origin = (await conn.execute(select(Message.origin))).scalar()
    assert origin is None and counts_as_speaking(origin)


def test_only_the_agents_and_proactive_lines_count_as_speaking() -> None:
    speaking = {origin for origin in Origin if counts_as_speaking(origin)}
    assert speaking == {Origin.AGENT_REPLY, Origin.PROACTIVE}


def _natural_window(bot_line: Sighting) -> bool:
    member = Sighting(2, "p2", 5, NOW, mentioned_me=False)
    activity = StreamActivity([bot_line, member])
    asker = Asker(group("g").kind, 5, 2, ambient_roll=0.99)
    request = gate_request(asker, MessageFacts(), activity, GatePolicy(), NOW)
    return request.seconds_since_bot_spoke is not None and request.replies_in_window > 0


def test_the_natural_window_opens_for_talk_only() -> None:
    earlier = NOW - timedelta(seconds=10)
    talk = Sighting(1, "p1", 1, earlier, from_bot=True)
    answer = Sighting(1, "p1", 1, earlier, from_bot=True, speaking=False)
    assert _natural_window(talk)
    assert not _natural_window(answer)


async def test_the_view_rebuilt_after_a_restart_agrees(kit: Kit) -> None:
    stream = group("g-restart")
    for pid, origin in (("said", "agent_reply"), ("answered", "command"), ("typed", None)):
        await kit.timeline.write(replace(own_message(stream, (), pid, NOW), origin=origin))
    written = await kit.timeline.write(own_message(stream, (), "probe", NOW))
    view = await ActivityBook(kit.engine).get(written.stream_id, BOT_ID, NOW)  # type: ignore[union-attr]
    speaking = {s.platform_message_id: s.speaking for s in view.sightings}
    assert speaking == {"said": True, "answered": False, "typed": True, "probe": True}
