"""The outgoing screen: what is masked, what is refused, what passes untouched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pallas.core.actions import Origin
from pallas.product.conversation.delivery.safety import (
    LINK_MASK,
    MASK,
    LinkRule,
    Numbers,
    OutgoingScreen,
    bare_numbers,
    load_words,
    mask_numbers,
    mask_text,
    screen,
)


def text_payload(text: str) -> dict[str, Any]:
    return {"segments": [{"kind": "text", "text": text}], "text": text}


@pytest.mark.parametrize(
    ("text", "masked", "rules"),
    [
        ("打 13800138000 找我", f"打 {MASK} 找我", ["phone"]),
        ("打 138 0013 8000 找我", f"打 {MASK} 找我", ["phone"]),
        ("打１３８－００１３－８０００", f"打{MASK}", ["phone"]),  # full-width digits and dashes
        ("+86 13800138000", MASK, ["phone"]),
        ("身份证 11010519491231002X", f"身份证 {MASK}", ["id_card"]),
        ("我QQ号是 123456789", f"我QQ号是 {MASK}", ["qq_number"]),
        # prices, dates, times and short numbers pass
        ("团购满10000包邮", "团购满10000包邮", []),
        ("2024-10-01 14:00 开会", "2024-10-01 14:00 开会", []),
        ("订单号 20241001123", "订单号 20241001123", []),
        ("订单号 202410011234567890", "订单号 202410011234567890", []),  # no date in it
        ("连 192.168.100.10 试试", "连 192.168.100.10 试试", []),
        ("版本 13800138000.1", "版本 13800138000.1", []),
    ],
)
def test_numbers_that_identify_someone_are_masked(text: str, masked: str, rules: list[str]) -> None:
    assert mask_numbers(text) == (masked, rules)


def test_a_word_from_the_list_refuses_the_message_in_any_spelling() -> None:
    for text in ("你是傻逼", "你是 傻 逼", "ＳＢ吧你"):
        assert screen(text_payload(text), Origin.AGENT_REPLY.value).payload is None
    assert screen(text_payload("usb 坏了"), Origin.AGENT_REPLY.value).rules == ()
    assert screen(text_payload("这是妈妈的味道"), Origin.AGENT_REPLY.value).rules == ()
    # a command's answer quotes members: never refused
    assert screen(text_payload("最近：有人说你是傻逼"), Origin.COMMAND.value).payload is not None


def test_at_all_only_in_a_commands_answer() -> None:
    segments = [{"kind": "at_all", "text": "@全体成员"}, {"kind": "text", "text": " 开会"}]
    payload = {"segments": segments, "text": "@全体成员 开会"}
    from_model = screen(payload, Origin.AGENT_REPLY.value)
    assert from_model.rules == ("at_all",) and from_model.payload is not None
    assert [s["kind"] for s in from_model.payload["segments"]] == ["text"]
    assert from_model.payload["text"] == " 开会"  # what the echo will read
    assert screen(payload, Origin.COMMAND.value).rules == ()


def test_the_owners_words_extend_the_list_and_a_bad_file_adds_nothing(tmp_path: Path) -> None:
    words = tmp_path / "outgoing_words.txt"
    words.write_text("# 公司的规矩\n竞品A\n内部 价格  # 写法随意\n", encoding="utf-8")
    own = OutgoingScreen(load_words(words))
    assert own(text_payload("竞品a 更便宜"), None).payload is None
    assert own(text_payload("内部价格是多少"), None).rules == ("word:内部价格",)
    broken = tmp_path / "broken.txt"
    broken.write_bytes(b"\xff\xfe\x00bad")
    assert load_words(broken) == frozenset()
    assert load_words(tmp_path / "missing.txt") == frozenset()


PEOPLE = Numbers(known=frozenset({"123456789", "55667788"}), own=frozenset({"55667788"}))


@pytest.mark.parametrize(
    ("text", "masked", "rules"),
    [
        ("他是 123456789 吧", f"他是 {MASK} 吧", ["member_id"]),  # a known member, bare
        ("他是１２３４５６７８９吧", f"他是{MASK}吧", ["member_id"]),
        ("你的号 55667788 我记得", "你的号 55667788 我记得", []),  # the asker's own
        ("你QQ号是 55667788", "你QQ号是 55667788", []),
        ("QQ号是 99990000", f"QQ号是 {MASK}", ["qq_number"]),  # labelled: always, unknown too
        ("房间 987654321 开了", "房间 987654321 开了", []),  # nobody's id: a number
    ],
)
def test_qq_numbers_of_people_other_than_the_asker_are_masked(
    text: str, masked: str, rules: list[str]
) -> None:
    assert mask_numbers(text, PEOPLE) == (masked, rules)


def test_bare_numbers_are_the_candidates_the_store_is_asked_about() -> None:
    assert bare_numbers("123456789 和 ４５６７８ 和 1234 和 3.14159") == {"123456789", "45678"}


@pytest.mark.parametrize(
    ("text", "masked", "hits"),
    [
        ("看 https://evil.example/x?a=1 这个", f"看 {LINK_MASK} 这个", ["link"]),
        ("看www.evil.example吧", f"看{LINK_MASK}吧", ["link"]),
        ("B站 https://www.bilibili.com/video/BV1", "B站 https://www.bilibili.com/video/BV1", []),
        ("https://m.bilibili.com/x，好看", "https://m.bilibili.com/x，好看", []),  # below it
        ("https://bilibili.com.evil.example", LINK_MASK, ["link"]),  # not below it
        ("https://www.bilibili.com:x@evil.example/a", LINK_MASK, ["link"]),  # evil.example
    ],
)
def test_the_link_rule_masks_links_but_the_allowed_hosts(
    text: str, masked: str, hits: list[str]
) -> None:
    rule = LinkRule(on=True, allowed=("bilibili.com",))
    assert mask_text(text, rule) == (masked, hits)
    assert mask_text(text, LinkRule(on=False)) == (text, [])  # off by default


def test_the_screen_reads_the_link_rule_as_it_is_now() -> None:
    rules = [LinkRule()]
    own = OutgoingScreen(links=lambda: rules[0])
    payload = text_payload("去 https://evil.example 看")
    assert not own(payload, Origin.AGENT_REPLY.value).changed
    rules[0] = LinkRule(on=True)
    done = own(payload, Origin.AGENT_REPLY.value)
    assert done.rules == ("link",) and done.payload["text"] == f"去 {LINK_MASK} 看"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("@全体成员 今晚开会", "全体成员 今晚开会"),
        ("＠所有人 看过来", "所有人 看过来"),
        ("@everyone hi", "everyone hi"),
        ("@allen 你好", "@allen 你好"),  # a name that starts with "all"
    ],
)
def test_at_all_typed_as_text_loses_its_at_outside_a_command(text: str, kept: str) -> None:
    done = screen(text_payload(text), Origin.AGENT_REPLY.value)
    assert done.payload is not None and done.payload["text"] == kept
    assert screen(text_payload(text), Origin.COMMAND.value).payload["text"] == text
