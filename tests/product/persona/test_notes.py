"""Relation notes observed from what a person says of themselves (pure): the fixed shapes,
requests that are not names, taunts that are not relations, and notes the guard refuses."""

from __future__ import annotations

import pytest

from pallas.product.persona.notes import acceptable, observed_notes


@pytest.mark.parametrize(
    ("words", "notes"),
    [
        ("以后叫我阿明吧", ["希望被叫作阿明"]),
        ("以后叫我阿明", ["希望被叫作阿明"]),
        ("你可以叫我小明哦", ["希望被叫作小明"]),
        ("我叫小明", ["名字是小明"]),
        ("我的名字是小明。", ["名字是小明"]),
        ("我是小红的哥哥", ["是小红的哥哥"]),
        ("大家好，我是小红的哥哥，请多关照", ["是小红的哥哥"]),
    ],
)
def test_plain_statements_about_oneself_become_notes(words: str, notes: list[str]) -> None:
    assert observed_notes(words) == notes


@pytest.mark.parametrize("words", ["叫我一声爸爸", "叫我起床", "叫我干嘛", "叫我去吃饭"])
def test_requests_are_not_names(words: str) -> None:
    assert observed_notes(words) == []


@pytest.mark.parametrize("words", ["我是你爸爸", "我是你的爸爸", "我是你们的爸爸", "我是您的粉丝"])
def test_taunts_at_the_bot_are_not_relations(words: str) -> None:
    assert observed_notes(words) == []


@pytest.mark.parametrize("words", ["叫我傻逼", "我叫傻逼", "我是傻逼的哥哥", "叫我废物吧"])
def test_vulgar_or_belittling_notes_are_refused(words: str) -> None:
    assert observed_notes(words) == []


@pytest.mark.parametrize("words", ["今天天气不错", "你好呀", "我是你的粉丝", ""])
def test_other_words_say_nothing_about_the_speaker(words: str) -> None:
    assert observed_notes(words) == []


def test_acceptable_reads_the_guard_s_lexicon() -> None:
    assert acceptable("是群主的弟弟")
    assert not acceptable("叫他傻逼")
    assert not acceptable("他就是个笨蛋")
