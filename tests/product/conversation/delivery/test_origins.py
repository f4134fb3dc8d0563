"""Every outbox row says which part of the bot it comes from, and the bot's recorded message
keeps it, whether the send's own record or the platform's echo is stored first; the gate's
view, also rebuilt from the store after a restart, counts only the bot taking part in the
talk (docs/gating.md, the natural window)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from pallas.core.actions import Origin, counts_as_speaking
from pallas.core.inbound import Segment, SegmentKind, StreamKey
from pallas.platform.onebot.send import own_message
from pallas.product.conversation.delivery.contract import OutgoingMessage
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery
from pallas.product.conversation.gate.activity import Sighting, StreamActivity
from pallas.product.conversation.gate.activity_book import ActivityBook
from pallas.product.conversation.gate.facts import Asker, MessageFacts, gate_request
from pallas.product.conversation.gate.policy import GatePolicy
from pallas.product.conversation.ingress import Ingress
from pallas.store.models import Message
from tests.product.conversation.delivery.test_outbox import Kit, Outlet, drained
from tests.product.conversation.delivery.test_outbox import kit as kit  # the fixture
from tests.support.inbound import BOT_ID, group

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
