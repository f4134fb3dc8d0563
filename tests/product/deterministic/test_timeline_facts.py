"""The facts the deterministic plugins read and write, on a real migrated database.

Reads: pallas/product/deterministic/recent.py. Writes: the bot's own records from
pallas/platform/onebot/send.py, which must dedupe with NapCat's echo of the same action.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta

import pytest
from nonebot.adapters.onebot.v11 import PokeNotifyEvent
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import InboundMessage, Recall, Segment, SegmentKind
from pallas.platform.onebot.send import own_message, own_poke
from pallas.platform.onebot.translate import translate_event
from pallas.product.conversation.ingress import Ingress, IngressOutcome
from pallas.product.deterministic.recent import SentPoke, bot_pokes_since, lines_up_to
from pallas.store.timeline import TimelineWriter
from tests.support.inbound import BOT_ID, T0, group, message


@pytest.fixture
async def ingress(engine: AsyncEngine) -> AsyncIterator[Ingress]:
    writer = TimelineWriter(engine)
    writer.start()
    yield Ingress(writer)
    await writer.close()


async def test_lines_up_to_a_message_oldest_first(engine: AsyncEngine, ingress: Ingress) -> None:
    said = [message(f"第{i}句", user_id=str(40 + i)) for i in range(5)]
    for item in said:
        await ingress.accept(item)
    await ingress.accept(message("别的群", stream=group("501")))
    lines = await lines_up_to(engine, group(), said[3].platform_message_id, limit=3)
    assert [line.text for line in lines] == ["第1句", "第2句", "第3句"]
    assert len({line.sender_person_id for line in lines}) == 3
    assert lines[0].segments == (Segment(SegmentKind.TEXT, text="第1句"),)
    assert await lines_up_to(engine, group(), "no-such-id", limit=3) == []
    assert await lines_up_to(engine, group("999"), said[0].platform_message_id, limit=3) == []


async def test_lines_carry_the_flags(engine: AsyncEngine, ingress: Ingress) -> None:
    gone = message("说错了")
    mine = message("我说的", user_id=BOT_ID, from_bot=True)
    for item in (gone, mine):
        await ingress.accept(item)
    await ingress.accept(Recall(group(), gone.platform_message_id, "42", T0))
    lines = await lines_up_to(engine, group(), mine.platform_message_id, limit=10)
    assert [(line.recalled, line.from_bot) for line in lines] == [(True, False), (False, True)]


async def test_bot_pokes_since_reads_only_the_bots_pokes_in_the_window(
    engine: AsyncEngine, ingress: Ingress
) -> None:
    stream = group()
    await ingress.accept(own_poke(stream, "42", T0 - timedelta(minutes=10)))
    await ingress.accept(own_poke(stream, "43", T0 - timedelta(seconds=30)))
    await ingress.accept(own_poke(group("501"), "44", T0))
    someone_poked_the_bot = replace(
        own_poke(stream, BOT_ID, T0),
        sender=message().sender,
        platform_message_id="p",
        from_bot=False,
    )
    await ingress.accept(someone_poked_the_bot)
    pokes = await bot_pokes_since(engine, stream, T0 - timedelta(minutes=5))
    assert pokes == [SentPoke("43", T0 - timedelta(seconds=30))]


async def test_the_bots_recorded_poke_dedupes_with_napcats_echo(ingress: Ingress) -> None:
    stream = group()
    recorded = own_poke(stream, "42", T0)
    echo = PokeNotifyEvent.model_validate(
        {
            "time": int(T0.timestamp()),
            "self_id": int(BOT_ID),
            "post_type": "notice",
            "notice_type": "notify",
            "sub_type": "poke",
            "group_id": int(stream.external_id),
            "user_id": int(BOT_ID),
            "target_id": 42,
        }
    )
    translated = translate_event(echo).event
    assert isinstance(translated, InboundMessage)
    assert translated == replace(recorded, time=translated.time)
    assert (await ingress.accept(recorded)).outcome is IngressOutcome.RECORDED
    assert (await ingress.accept(translated)).outcome is IngressOutcome.DUPLICATE


async def test_the_bots_recorded_message_is_the_bots(engine: AsyncEngine, ingress: Ingress) -> None:
    segments = (
        Segment(SegmentKind.AT, text="@小明", target="42"),
        Segment(SegmentKind.TEXT, text=" 欢迎"),
    )
    sent = own_message(group(), segments, "9001", T0)
    assert (sent.text, sent.mentions, sent.from_bot) == ("@小明 欢迎", ("42",), True)
    assert (await ingress.accept(sent)).outcome is IngressOutcome.RECORDED
    assert (await ingress.accept(sent)).outcome is IngressOutcome.DUPLICATE
    [line] = await lines_up_to(engine, group(), "9001", limit=5)
    assert line.from_bot and line.segments == segments
