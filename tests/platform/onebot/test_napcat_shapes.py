"""What NapCat really sends (tests/fixtures/napcat) reaches the timeline as a member sees it.

Each frame goes the way a frame from the socket goes: JSON text -> read_event_frame ->
translate_event. The numbers in the test names refer to the platform-boundary checklist in
docs/napcat.md.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pallas.core.inbound import (
    GroupNotice,
    InboundEvent,
    InboundMessage,
    NoticeKind,
    SegmentKind,
    StreamKind,
)
from pallas.platform.onebot.adapter import read_event_frame
from pallas.platform.onebot.outbound import to_onebot_message
from pallas.platform.onebot.translate import Translation, translate_event
from tests.support.napcat_corpus import corpus_frame, load_corpus

BOT = "10000"
NOW_S = 1_764_500_100


def read(frame: dict[str, Any]) -> Translation:
    event = read_event_frame(json.dumps(frame, ensure_ascii=False), BOT, now_s=NOW_S)
    assert event is not None
    return translate_event(event)


def fact(name: str) -> InboundEvent | None:
    return read(corpus_frame(name)).event


def message(name: str) -> InboundMessage:
    item = fact(name)
    assert isinstance(item, InboundMessage)
    return item


def notice(name: str) -> GroupNotice:
    item = fact(name)
    assert isinstance(item, GroupNotice)
    return item


def test_01_a_friend_poke_names_the_poker_from_sender_id() -> None:
    echo = message("notice_friend_poke_by_bot")  # the bot's own poke-back, reported back
    assert echo.from_bot and echo.is_poke
    assert echo.sender.user_id == BOT
    assert (echo.stream.kind, echo.stream.external_id) == (StreamKind.PRIVATE, "42")
    assert echo.mentions == ("42",)
    incoming = message("notice_friend_poke")
    assert not incoming.from_bot and incoming.sender.user_id == "42" and incoming.mentions_me
    assert incoming.stream.external_id == "42"


def test_02_an_own_poke_and_its_echo_carry_the_same_poker_and_target() -> None:
    group_echo = message("notice_group_poke_by_bot")
    assert group_echo.from_bot and group_echo.sender.user_id == BOT
    assert group_echo.platform_message_id.startswith(f"poke:{BOT}:42:")


def test_03_the_group_name_travels_with_the_message() -> None:
    assert message("message_group_text").stream_name == "测试群"
    assert message("message_group_owner_second_group").stream_name == "二群"


def test_04_faces_keep_their_names() -> None:
    face = message("segment_face").segments[0]
    assert face.kind is SegmentKind.FACE and face.text == "[表情:吃瓜]" and face.target == "271"
    assert message("segment_face_super").segments[0].text == "[表情:打call]"


def test_05_a_market_face_is_not_a_picture_and_resends_as_itself() -> None:
    mface = message("segment_market_face").segments[0]
    assert mface.kind is SegmentKind.MARKET_FACE
    assert mface.text == "[表情包:开心]"
    assert mface.detail_value("emoji_id") and mface.detail_value("key")
    (sent,) = to_onebot_message([mface])
    assert sent.type == "mface"
    assert sent.data["emoji_id"] == mface.detail_value("emoji_id")
    assert sent.data["key"] == mface.detail_value("key")
    plain = message("segment_image").segments[0]
    assert plain.kind is SegmentKind.IMAGE and plain.text == "[图片]"


def test_06_an_at_keeps_the_id_the_name_is_looked_up_later() -> None:
    msg = message("segment_at")
    assert msg.mentions == ("43",)
    assert msg.segments[0].target == "43"


def test_07_dice_and_rock_paper_scissors_keep_their_results() -> None:
    assert message("segment_dice").text == "[骰子:4]"
    assert message("segment_rps").text == "[猜拳:剪刀]"


def test_08_a_forward_shows_its_first_lines_or_keeps_its_id_for_a_fetch() -> None:
    with_content = message("segment_forward_with_content").segments[0]
    assert with_content.kind is SegmentKind.FORWARD
    assert with_content.text.startswith("[聊天记录:") and ": " in with_content.text
    inner = corpus_frame("segment_forward_with_content")["message"][0]["data"]["content"]
    first_name = inner[0]["sender"].get("card") or inner[0]["sender"]["nickname"]
    assert first_name in with_content.text
    bare = message("segment_forward").segments[0]
    assert bare.text == "[聊天记录]" and bare.target == "7576390011223349999"


def test_09_online_files_and_flash_transfers_keep_what_they_say() -> None:
    online = message("segment_onlinefile").segments[0]
    assert online.kind is SegmentKind.FILE and online.text == "[在线文件:旅行照片.zip]"
    assert online.media is not None and online.media.size == 10_485_760
    flash = message("segment_flashtransfer").segments[0]
    assert flash.kind is SegmentKind.FILE and flash.text == "[闪传文件]"
    assert flash.detail_value("fileSetId")
    assert message("segment_file").text == "[文件:第十一周周报.docx]"


def test_10_the_sender_card_and_role_are_read() -> None:
    msg = message("message_group_text")
    assert (msg.sender.card, msg.sender.role, msg.sender.nickname) == ("四号", "member", "阿四")
    assert message("message_group_owner_second_group").sender.role == "owner"


def test_11_a_temporary_chat_keeps_the_group_it_came_through() -> None:
    temp = message("message_private_temp")
    assert (temp.stream.kind, temp.stream.external_id) == (StreamKind.PRIVATE, "43")
    assert temp.via_group == "500"
    assert message("message_private_friend").via_group is None


@pytest.mark.parametrize(
    ("name", "kind", "user_id", "value"),
    [
        ("notice_essence_add", NoticeKind.ESSENCE_ADDED, "42", ""),
        ("notice_group_card", NoticeKind.CARD_CHANGED, "42", "四号·摸鱼中"),
        ("notice_group_ban", NoticeKind.MEMBER_BANNED, "42", "600"),
        ("notice_group_ban_whole", NoticeKind.MEMBER_BANNED, "0", "-1"),  # -1: until lifted
        ("notice_group_lift_ban", NoticeKind.MEMBER_UNBANNED, "42", ""),
        ("notice_notify_title", NoticeKind.TITLE_CHANGED, "42", "摸鱼大师"),
        ("notice_notify_group_name", NoticeKind.GROUP_RENAMED, "44", "测试群·周末版"),
        ("notice_group_admin_set", NoticeKind.ADMIN_SET, "42", ""),
        ("notice_group_admin_unset", NoticeKind.ADMIN_UNSET, "43", ""),
        ("notice_group_upload", NoticeKind.FILE_UPLOADED, "42", "第十一周周报.docx"),
        ("notice_group_msg_emoji_like", NoticeKind.REACTION_ADDED, "42", "76"),
        ("notice_group_msg_emoji_like_remove", NoticeKind.REACTION_REMOVED, "43", "128077"),
    ],
)
def test_12_group_notices_a_member_would_notice_become_facts(
    name: str, kind: NoticeKind, user_id: str, value: str
) -> None:
    item = notice(name)
    assert (item.kind, item.user_id, item.value) == (kind, user_id, value)
    assert (item.stream.kind, item.stream.external_id) == (StreamKind.GROUP, "500")


def test_12_notices_that_concern_a_message_name_it() -> None:
    assert notice("notice_essence_add").message_id == "7000039"
    assert notice("notice_group_msg_emoji_like").message_id == "7000040"


@pytest.mark.parametrize(
    "name",
    [
        "notice_notify_profile_like",
        "notice_notify_input_status",
        "notice_notify_gray_tip",
        "notice_friend_add",
        "notice_bot_offline",
        "notice_online_file_receive_cancel",
        "meta_heartbeat",
        "request_friend",
    ],
)
def test_notices_outside_the_timeline_record_nothing_and_raise_nothing(name: str) -> None:
    assert fact(name) is None


def test_every_segment_napcat_sends_is_known() -> None:
    for frame in load_corpus("segment_") + load_corpus("message_"):
        translation = read(frame.frame)
        assert translation.unknown_segment_types == (), frame.name
        assert isinstance(translation.event, InboundMessage), frame.name
        assert "[无法读取的内容]" not in translation.event.text, frame.name


def test_every_corpus_event_reads_as_nonebots_own_validation_would_read_it() -> None:
    # The adapter builds a frame's segments itself (NoneBot's validator is slow at it); the
    # event must be the one NoneBot's own path makes from the same cleaned frame.
    from nonebot.adapters.onebot.v11 import Adapter

    from pallas.platform.onebot.frames import clean_event

    compared = 0
    for item in load_corpus():
        frame = item.frame
        if frame.get("post_type") not in ("message", "message_sent"):
            continue
        ours = read_event_frame(json.dumps(frame, ensure_ascii=False), BOT, now_s=NOW_S)
        clean = clean_event(json.loads(json.dumps(frame)), text="", now_s=NOW_S)
        stock = Adapter.json_to_event(clean.payload)
        assert ours is not None and stock is not None, item.name
        assert type(ours) is type(stock), item.name
        assert ours.model_dump() == stock.model_dump(), item.name
        originals = [list(getattr(e, "original_message", ())) for e in (ours, stock)]
        assert originals[0] == originals[1], item.name
        compared += 1
    assert compared >= 20
