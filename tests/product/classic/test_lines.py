"""Learned lines, the pure rules: keys, which pairs are learned, which answer is said, bans."""

from __future__ import annotations

import pytest

from pallas.core.inbound import MediaRef, Segment, SegmentKind
from pallas.product.classic.lines import (
    AnswerRules,
    Candidate,
    Line,
    chance,
    choose,
    is_ban,
    key_of,
    learnable,
    sayable,
)


def words(text: str) -> tuple[Segment, ...]:
    return (Segment(SegmentKind.TEXT, text=text),)


FACE = Segment(SegmentKind.FACE, text="[微笑]", target="14")
PICTURE = Segment(SegmentKind.IMAGE, text="[图片]", media=MediaRef(file="AB12.png", url="https://x/a"))
AT = Segment(SegmentKind.AT, text="@甲", target="123")


def test_a_line_is_its_words_faces_and_pictures_and_nothing_else_is_learned() -> None:
    assert key_of("早 上好", words("早 上好")) == key_of("早上好", words("早上好"))
    assert key_of("Hi", words("Hi")) == key_of("hi", words("hi"))
    assert key_of("[微笑]", (FACE,)) == "[face:14]"  # a context that is a single face
    assert key_of("[图片]", (PICTURE,)) == "[image:AB12.png]"
    assert key_of("@甲 你好", (AT, *words(" 你好"))) == ""  # an @ is someone's, not a formula
    assert key_of("你真是个傻逼", words("你真是个傻逼")) == ""  # the lexicon: never learned
    assert key_of("长" * 61, words("长" * 61)) == ""


def test_what_can_be_said_back() -> None:
    assert sayable(words("早上好呀")) and sayable((FACE,)) and sayable((PICTURE,))
    assert not sayable((AT,))
    no_url = Segment(SegmentKind.IMAGE, media=MediaRef(file="x.image"))
    assert not sayable((no_url,))


def line(key: str, sender: int, at: float, *, to_bot: bool = False) -> Line:
    return Line(key, key, sender, at, sayable=True, to_bot=to_bot)


@pytest.mark.parametrize(
    ("context", "answer", "learned"),
    [
        (line("早", 1, 0), line("早上好呀", 2, 5), True),
        (line("早", 1, 0), line("早", 1, 5), False),  # one person pasting a line
        (line("早", 1, 0), line("早上好呀", 2, 500), False),  # too late: another talk
        (line("早", 1, 0, to_bot=True), line("早上好呀", 2, 5), False),  # a call to the bot
        (line("早", 1, 0), line("早上好呀", 2, 5, to_bot=True), False),
        (line("", 1, 0), line("早上好呀", 2, 5), False),
        (None, line("早上好呀", 2, 5), False),  # the bot spoke in between
    ],
)
def test_which_consecutive_lines_make_a_pair(
    context: Line | None, answer: Line, learned: bool
) -> None:
    assert learnable(context, answer) is learned


def candidate(count: int, answerers: int, *, here: bool = True, pid: int = 1) -> Candidate:
    return Candidate(pid, count, answerers, here, ({"kind": "text", "text": "好"},), "好")


RULES = AnswerRules()


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        (candidate(3, 2), 1.0),  # well established: always
        (candidate(5, 1), 0.5),  # one person's habit: at most half
        (candidate(2, 2), 0.2),
        (candidate(1, 1), 0.0),  # said once: a chance, not a habit
        (candidate(9, 3, here=False), 0.0),  # another group's needs ten
        (candidate(10, 3, here=False), 1.0),
    ],
)
def test_how_likely_a_learned_answer_is(found: Candidate, expected: float) -> None:
    assert chance(found, RULES) == pytest.approx(expected)


def test_the_best_answer_is_said_unless_cooling_down_or_the_roll_loses() -> None:
    weak, strong = candidate(2, 1, pid=1), candidate(4, 3, pid=2)
    assert choose([weak, strong], RULES, roll=0.99, since_last_answer_s=None) == strong
    assert choose([weak, strong], RULES, roll=0.0, since_last_answer_s=10) is None  # cool-down
    assert choose([weak], RULES, roll=0.5, since_last_answer_s=60) is None  # 0.2 < the roll
    assert choose([weak], RULES, roll=0.1, since_last_answer_s=60) == weak
    assert choose([], RULES, roll=0.0, since_last_answer_s=None) is None


@pytest.mark.parametrize(
    ("text", "banned"),
    [
        ("不可以", True),
        (" 不可以！", True),
        ("不 可以", True),
        ("这样不可以吧", False),  # inside a sentence: no ban
        ("", False),
    ],
)
def test_a_ban_is_exactly_a_ban_word(text: str, banned: bool) -> None:
    assert is_ban(text, ("不可以",)) is banned
