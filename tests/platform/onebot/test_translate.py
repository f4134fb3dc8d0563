"""OneBot v11 events as NapCat sends them -> the core's inbound shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from nonebot.adapters.onebot.v11 import Event

from pallas.core.inbound import (
    InboundMessage,
    MemberChange,
    Recall,
    Segment,
    SegmentKind,
    StreamKind,
)
from pallas.platform.onebot.adapter import PallasOneBotAdapter
from pallas.platform.onebot.segments import MAX_TEXT_CHARS, convert_segments
from pallas.platform.onebot.translate import UnsupportedEventError, translate_event
from tests.support.fake_napcat import FakeNapCat, at, image, reply, text

NAPCAT = FakeNapCat("ws://unused", 10000)


def parse(event: dict[str, Any]) -> Event:
    full = {"time": 1_764_500_000, "self_id": 10000, **event}
    parsed = PallasOneBotAdapter.json_to_event(full)
    assert parsed is not None
    return parsed


def inbound(event: dict[str, Any]) -> InboundMessage:
    result = translate_event(parse(event)).event
    assert isinstance(result, InboundMessage)
    return result


def test_group_message_shape() -> None:
    msg = inbound(
        NAPCAT.group_message(
            500, 42, [reply(7), at(10000), text(" 你好"), at("all")], nickname="n", card="卡片名"
        )
    )
    assert msg.stream.kind is StreamKind.GROUP and msg.stream.external_id == "500"
    assert msg.stream.self_id == "10000" and msg.stream.platform == "qq"
    assert msg.sender.display_name == "卡片名"
    assert msg.text == "@10000 你好@全体成员"
    assert msg.reply_to == "7"
    assert msg.mentions == ("10000",) and msg.mentions_me and msg.mentions_all
    assert msg.time.year == 2025 and msg.time.tzinfo is not None
    assert not msg.from_bot


def test_nickname_at_the_start_is_kept_in_the_text() -> None:
    # The adapter strips a leading nickname / @ from `event.message`; the timeline keeps all.
    msg = inbound(NAPCAT.group_message(500, 42, [at(10000), text(" 牛牛 在吗")]))
    assert msg.text == "@10000 牛牛 在吗"


@pytest.mark.parametrize(
    ("segment", "kind", "rendered"),
    [
        ({"type": "face", "data": {"id": "14"}}, SegmentKind.FACE, "[表情]"),
        (image(), SegmentKind.IMAGE, "[图片]"),
        (
            {"type": "image", "data": {"file": "s.gif", "summary": "[动画表情]", "sub_type": 1}},
            SegmentKind.IMAGE,
            "[动画表情]",
        ),
        (
            {"type": "mface", "data": {"summary": "[开心]", "url": "u"}},
            SegmentKind.MARKET_FACE,
            "[表情包:开心]",
        ),
        ({"type": "record", "data": {"file": "a.amr"}}, SegmentKind.RECORD, "[语音]"),
        ({"type": "video", "data": {"file": "v.mp4"}}, SegmentKind.VIDEO, "[视频]"),
        (
            {"type": "file", "data": {"file": "报告.pdf", "file_size": "1024"}},
            SegmentKind.FILE,
            "[文件:报告.pdf]",
        ),
        (
            {"type": "json", "data": {"data": json.dumps({"prompt": "[分享]某视频"})}},
            SegmentKind.CARD,
            "[卡片:[分享]某视频]",
        ),
        ({"type": "json", "data": {"data": "{broken"}}, SegmentKind.CARD, "[卡片]"),
        ({"type": "xml", "data": {"data": "<msg/>"}}, SegmentKind.CARD, "[卡片]"),
        ({"type": "forward", "data": {"id": "fw1"}}, SegmentKind.FORWARD, "[聊天记录]"),
        ({"type": "brand_new", "data": {}}, SegmentKind.OTHER, "[brand_new]"),
    ],
)
def test_segment_renderings(segment: dict[str, Any], kind: SegmentKind, rendered: str) -> None:
    converted = convert_segments([(segment["type"], segment["data"])])
    assert converted.segments[0].kind is kind
    assert converted.segments[0].text == rendered


def test_media_is_a_reference_not_a_download() -> None:
    seg = convert_segments(
        [("file", {"file": "a.zip", "file_id": "fid", "file_size": "12", "url": "http://x"})]
    ).segments[0]
    assert seg.media is not None
    assert (seg.media.file, seg.media.url, seg.media.size) == ("fid", "http://x", 12)


def test_unknown_segment_types_are_reported() -> None:
    result = translate_event(parse(NAPCAT.group_message(500, 42, [{"type": "x1", "data": {}}])))
    assert result.unknown_segment_types == ("x1",)


def test_text_is_capped_and_flagged() -> None:
    converted = convert_segments([("text", {"text": "a" * 30_000}), ("text", {"text": "b"})])
    assert converted.truncated
    assert sum(len(s.text) for s in converted.segments) == MAX_TEXT_CHARS


def test_segment_round_trips_through_json() -> None:
    for seg in inbound(NAPCAT.group_message(500, 42, [reply(1), at(2), image()])).segments:
        assert Segment.from_json(seg.to_json()) == seg


def test_private_message_and_own_messages() -> None:
    private = inbound(NAPCAT.private_message(42, "hi"))
    assert (private.stream.kind, private.stream.external_id) == (StreamKind.PRIVATE, "42")
    echoed = inbound(NAPCAT.group_message(500, 10000, "我自己"))
    assert echoed.from_bot
    sent = NAPCAT.private_message(10000, "给你", message_id=5)
    sent.update(post_type="message_sent", target_id=42)
    own = translate_event(parse(sent)).event
    assert isinstance(own, InboundMessage) and own.from_bot
    assert own.stream.external_id == "42", "a private message sent belongs to the recipient's chat"


def test_poke_is_a_message_with_a_synthetic_id_and_no_names() -> None:
    poke = inbound(NAPCAT.poke(500, 42, 10000))
    assert poke.is_poke and poke.mentions_me
    assert poke.platform_message_id == "poke:42:10000:1764500000"
    assert poke.text == "[戳一戳 → 10000]"
    private = inbound(NAPCAT.poke(None, 42, 10000))
    assert (private.stream.kind, private.stream.external_id) == (StreamKind.PRIVATE, "42")


def test_notices() -> None:
    recall = translate_event(parse(NAPCAT.group_recall(500, 42, 77, operator_id=1))).event
    assert isinstance(recall, Recall)
    assert (recall.platform_message_id, recall.operator_id) == ("77", "1")
    joined = translate_event(parse(NAPCAT.member_change(500, 43, joined=True))).event
    assert isinstance(joined, MemberChange) and joined.joined and joined.user_id == "43"
    friend_recall = parse(
        {"post_type": "notice", "notice_type": "friend_recall", "user_id": 42, "message_id": 9}
    )
    assert isinstance(translate_event(friend_recall).event, Recall)


def test_meta_requests_and_other_notices_record_nothing() -> None:
    heartbeat = parse(
        {"post_type": "meta_event", "meta_event_type": "heartbeat", "status": {}, "interval": 5000}
    )
    profile_like = parse(
        {
            "post_type": "notice",
            "notice_type": "notify",
            "sub_type": "profile_like",
            "operator_id": 2,
            "operator_nick": "n",
            "times": 1,
        }
    )
    assert translate_event(heartbeat).event is None
    assert translate_event(profile_like).event is None


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ({"post_type": "hologram"}, "unknown post_type 'hologram'"),
        ({"post_type": "message", "message_type": "group", "user_id": 1}, "missing required"),
        ({"post_type": "notice", "notice_type": "group_recall", "group_id": 1}, "missing required"),
        (
            {
                "post_type": "notice",
                "notice_type": "notify",
                "sub_type": "poke",
                "user_id": 1,
                "group_id": 2,
            },
            "missing required",
        ),
    ],
)
def test_unreadable_events_are_refused(event: dict[str, Any], reason: str) -> None:
    with pytest.raises(UnsupportedEventError, match=reason):
        translate_event(parse(event))
