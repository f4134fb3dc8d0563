"""The bot's own voice as pure rules: mood, the day's routine, sessions, the fingerprint."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from pallas.product.persona.fingerprint import SentReply, fingerprint, habits, landed
from pallas.product.persona.mood import (
    GROUP_WEIGHT,
    HALF_LIFE,
    PUSH,
    mood_line,
    moved,
    push_of,
    settled,
)
from pallas.product.persona.routine import asked_what_doing, routine_line, slot_at
from pallas.product.persona.session import QUIET, TONES, Session, refreshed

T0 = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)  # 12:00 in Shanghai


@pytest.mark.parametrize(
    ("word", "push"),
    [("开心", PUSH), ("有点烦", -PUSH), ("无语", -PUSH), ("期待", PUSH), ("平静", 0.0)],
)
def test_mood_words_push_one_way_or_none(word: str, push: float) -> None:
    assert push_of(word) == push


def test_mood_settles_back_to_calm_and_groups_weigh_less() -> None:
    assert settled(0.8, T0, T0 + HALF_LIFE) == pytest.approx(0.4)
    assert settled(0.8, T0, T0 - HALF_LIFE) == 0.8  # time running backwards adds nothing
    private = moved(0.0, T0, T0, ["开心"], 1.0)
    group = moved(0.0, T0, T0, ["开心"], GROUP_WEIGHT)
    assert private == pytest.approx(PUSH) and group == pytest.approx(PUSH * GROUP_WEIGHT)
    assert moved(0.9, T0, T0, ["开心"] * 5, 1.0) == 1.0  # bounded
    assert moved(-0.9, T0, T0, ["难过"] * 5, 1.0) == -1.0


@pytest.mark.parametrize(
    ("valence", "line"),
    [
        (0.6, "心情很好"),
        (0.2, "心情不错"),
        (0.0, ""),
        (-0.3, "心情有点低落"),
        (-0.8, "心情很差，话少"),
    ],
)
def test_mood_lines(valence: float, line: str) -> None:
    assert mood_line(valence) == line


def test_the_routine_colours_the_tone_and_names_the_activity_only_when_asked() -> None:
    night = datetime(2026, 12, 2, 19, 30, tzinfo=UTC)  # 03:30 in Shanghai
    assert slot_at(night).activity == "睡觉"
    assert routine_line(night, asked=False) == "迷迷糊糊的，回得很短"
    assert routine_line(night, asked=True).startswith("现在在睡觉")
    assert slot_at(T0).activity == "吃午饭"
    assert asked_what_doing("你在干嘛呢") and not asked_what_doing("吃了吗")


def test_a_session_is_refreshed_only_after_a_long_quiet() -> None:
    rng = random.Random(7)
    current = Session(T0, TONES[0], "")
    assert refreshed(current, T0 + QUIET / 2, T0 + QUIET, False, rng) is None
    fresh = refreshed(current, T0, T0 + QUIET + timedelta(seconds=1), False, rng)
    assert fresh is not None and fresh.tone in TONES and fresh.resumption == ""
    first = refreshed(None, None, T0, True, rng)
    assert first is not None and first.resumption == ""  # nothing to resume
    back = refreshed(current, T0, T0 + timedelta(days=3), True, rng)
    assert back is not None and back.resumption.startswith("你们上次聊天是3天前")
    hours = refreshed(current, T0, T0 + timedelta(hours=7), True, rng)
    assert hours is not None and "7小时前" in hours.resumption


def test_a_reply_landed_when_someone_laughed_or_quoted_it_and_nobody_attacked() -> None:
    assert landed(SentReply("害，就这呗", ("哈哈哈哈",)))
    assert landed(SentReply("就这呗", ("嗯",), quoted=True))
    assert not landed(SentReply("就这呗", ("嗯", "好的")))
    assert not landed(SentReply("就这呗", ("哈哈", "你是傻逼")))  # an attack is no success


def test_habits_and_the_fingerprint() -> None:
    assert habits("害，这不就来了呗。明天再说啦") == ["害", "呗", "啦"]
    assert habits("好") == []
    replies = [
        SentReply("害，就这呗", ("哈哈",)),
        SentReply("走呗", ("笑死",)),
        SentReply("害，行啦", ("确实",)),
        SentReply("不去啦", ("嗯",)),  # did not land: its 啦 is not counted
        SentReply("害", ("你好蠢",)),
    ]
    assert fingerprint(replies) == ["害", "呗"]
