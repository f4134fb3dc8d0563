"""Malformed frames: store what can be read, mark what could not, one bounded warning line.

Every case goes the way a frame from the socket goes (JSON text -> read_event_frame ->
translate_event -> the real timeline writer), on each database backend. The numbers refer to
the platform-boundary checklist in docs/napcat.md.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from loguru import logger
from nonebot.exception import NoLogException
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import InboundMessage
from pallas.core.text import excerpt
from pallas.platform.onebot.adapter import FrameError, read_event_frame
from pallas.platform.onebot.frames import MAX_DEPTH
from pallas.platform.onebot.translate import translate_event
from pallas.store.models import Identity, Message
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.napcat_corpus import corpus_frame

BOT = "10000"
NOW_S = 1_764_500_100


@pytest.fixture
def warnings() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(
        lambda m: lines.append(str(m).rstrip("\n")), level="WARNING", format="{message}"
    )
    yield lines
    logger.remove(sink)


def group_text(message: Any, message_id: int) -> dict[str, Any]:
    frame = corpus_frame("message_group_text")
    frame["message"] = message
    frame["message_id"] = message_id
    return frame


def read(text: str) -> InboundMessage:
    event = read_event_frame(text, BOT, now_s=NOW_S)
    assert event is not None
    with contextlib.suppress(NoLogException):
        event.get_log_string()  # what NoneBot logs before any plugin sees the event
    inbound = translate_event(event).event
    assert isinstance(inbound, InboundMessage)
    return inbound


async def stored(engine: AsyncEngine, platform_message_id: str) -> Any:
    async with engine.connect() as conn:
        return (
            await conn.execute(
                select(Message).where(Message.platform_message_id == platform_message_id)
            )
        ).one()


def one_bounded_warning(lines: list[str]) -> None:
    assert len(lines) == 1, lines
    assert len(lines[0]) < 1_000 and "Traceback" not in lines[0]


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "text", "data": "not an object"},
        {"type": {"a": 1}, "data": {}},
        {"type": ["x"], "data": {}},
        "a bare string",
        7,
    ],
    ids=["data-string", "type-dict", "type-list", "segment-string", "segment-number"],
)
async def test_13_a_malformed_segment_keeps_the_rest_of_the_message(
    engine: AsyncEngine, writer: TimelineWriter, warnings: list[str], bad: Any
) -> None:
    frame = group_text([{"type": "text", "data": {"text": "前半句"}}, bad], 8_100_001)
    msg = read(json.dumps(frame, ensure_ascii=False))
    assert msg.text == "前半句[无法读取的内容]"
    one_bounded_warning(warnings)
    assert isinstance(await writer.write(msg), MessageWritten)
    assert (await stored(engine, "8100001")).text == "前半句[无法读取的内容]"


@pytest.mark.parametrize("size", ["Infinity", "-Infinity", "NaN", "1e400", '"abc"', "-1"])
async def test_13_an_impossible_file_size_is_no_size(
    engine: AsyncEngine, writer: TimelineWriter, size: str
) -> None:
    frame = group_text([{"type": "file", "data": {"file": "a.zip", "file_size": 0}}], 8_100_002)
    text = json.dumps(frame, ensure_ascii=False).replace('"file_size": 0', f'"file_size": {size}')
    msg = read(text)
    assert msg.segments[0].media is not None and msg.segments[0].media.size is None
    await writer.write(msg)
    assert (await stored(engine, "8100002")).text == "[文件:a.zip]"


@pytest.mark.parametrize("bad_time", [10**20, -5, 0, "noon", 1.5e12, None])
async def test_13_a_time_out_of_range_becomes_the_arrival_time(
    engine: AsyncEngine, writer: TimelineWriter, warnings: list[str], bad_time: Any
) -> None:
    frame = group_text([{"type": "text", "data": {"text": "几点了"}}], 8_100_003)
    frame["time"] = bad_time
    msg = read(json.dumps(frame))
    assert msg.time == datetime.fromtimestamp(NOW_S, UTC)
    one_bounded_warning(warnings)
    await writer.write(msg)
    assert (await stored(engine, "8100003")).time == msg.time


async def test_13_a_card_nested_ten_thousand_deep_is_a_card(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    deep = "[" * 10_000 + "]" * 10_000
    frame = group_text([{"type": "json", "data": {"data": deep}}], 8_100_004)
    msg = read(json.dumps(frame))
    assert msg.text == "[卡片]"
    await writer.write(msg)
    assert (await stored(engine, "8100004")).text == "[卡片]"


async def test_13_segment_data_nested_past_the_limit_is_cut_not_lost(
    engine: AsyncEngine, writer: TimelineWriter, warnings: list[str]
) -> None:
    nested: Any = "底"
    for _ in range(900):  # deep enough to break recursive code, shallow enough to decode
        nested = {"x": nested}
    frame = group_text(
        [{"type": "text", "data": {"text": "还在"}}, {"type": "x", "data": nested}], 8_100_005
    )
    msg = read(json.dumps(frame))
    assert msg.text.startswith("还在")
    assert any(f"over {MAX_DEPTH} levels" in line for line in warnings)
    await writer.write(msg)
    assert (await stored(engine, "8100005")).text.startswith("还在")


async def test_14_lone_surrogates_are_replaced_and_the_message_is_stored(
    engine: AsyncEngine, writer: TimelineWriter, warnings: list[str]
) -> None:
    frame = group_text([{"type": "text", "data": {"text": "坏表情\ud83d结束 好表情😀"}}], 8_100_006)
    frame["sender"]["nickname"] = "名字\udc00"
    text = json.dumps(frame)  # escapes like NapCat: "\ud83d", and the pair for 😀
    assert "\\ud83d" in text
    msg = read(text)
    assert msg.text == "坏表情\ufffd结束 好表情😀"
    assert msg.sender.nickname == "名字\ufffd"
    one_bounded_warning(warnings)
    await writer.write(msg)
    assert (await stored(engine, "8100006")).text == msg.text
    async with engine.connect() as conn:
        nickname = (
            await conn.execute(select(Identity.nickname).where(Identity.user_id == "42"))
        ).scalar_one()
    assert nickname == "名字\ufffd"


def test_14_a_log_line_with_a_lone_surrogate_still_prints(warnings: list[str]) -> None:
    logger.warning("inbound not persisted: {}", excerpt("坏\ud800"))
    assert warnings == ["inbound not persisted: 坏\\ud800"]


@pytest.mark.parametrize(
    "change",
    [
        {"message_type": 5},
        {"message_type": ["group"]},
        {"post_type": ""},
        {"post_type": 7},
        {"notice_type": {"a": 1}, "post_type": "notice"},
        {"sub_type": None, "message_type": None},
    ],
)
def test_15_wrong_typed_keys_are_one_frame_error(change: dict[str, Any]) -> None:
    frame = {**corpus_frame("message_group_text"), **change}
    with pytest.raises(FrameError):
        read_event_frame(json.dumps(frame), BOT, now_s=NOW_S)


def test_16_json_ten_thousand_levels_deep_is_one_frame_error() -> None:
    with pytest.raises(FrameError, match="not an object"):
        read_event_frame("[" * 10_000 + "]" * 10_000, BOT, now_s=NOW_S)
    deep_event = '{"post_type": "message", "self_id": 10000, "x": ' + "[" * 10_000 + "]" * 10_000
    with pytest.raises(FrameError, match="unreadable event"):
        read_event_frame(deep_event + "}", BOT, now_s=NOW_S)


async def test_16_a_message_too_deep_for_the_decoder_is_stored_with_the_deep_part_cut(
    engine: AsyncEngine, writer: TimelineWriter, warnings: list[str]
) -> None:
    frame = group_text(
        [{"type": "text", "data": {"text": "还在"}}, {"type": "x", "data": {}}], 8_100_008
    )
    text = json.dumps(frame).replace(
        '"data": {}', '"data": {"deep": ' + "[" * 5_000 + "]" * 5_000 + "}"
    )
    msg = read(text)
    assert msg.text.startswith("还在")
    one_bounded_warning(warnings)
    assert f"over {MAX_DEPTH} levels cut" in warnings[0]
    await writer.write(msg)
    assert (await stored(engine, "8100008")).text.startswith("还在")


@pytest.mark.parametrize(("value", "shown"), [(5, "5"), (True, "True"), (1.5, "1.5")])
async def test_17_a_non_string_text_is_text(
    engine: AsyncEngine, writer: TimelineWriter, value: Any, shown: str
) -> None:
    frame = group_text([{"type": "text", "data": {"text": value}}], 8_100_007)
    msg = read(json.dumps(frame))  # read() also renders NoneBot's log line
    assert msg.text == shown
    await writer.write(msg)
    assert (await stored(engine, "8100007")).text == shown
