"""The repeat decision, one row per rule."""

from __future__ import annotations

import pytest

from pallas.core.inbound import MediaRef, Segment, SegmentKind
from pallas.product.deterministic.repeat import (
    REPEAT_WINDOW,
    RecentLine,
    Repeat,
    decide_repeat,
)

BOT = 1
A, B, C = 11, 12, 13


def said(person: int, text: str = "草", **flags: bool) -> RecentLine:
    return RecentLine(person, person == BOT, text, (Segment(SegmentKind.TEXT, text=text),), **flags)


def image(person: int, file: str = "sticker-1.gif") -> RecentLine:
    media = MediaRef(file=file, url=f"https://example.invalid/{file}")
    segment = Segment(SegmentKind.IMAGE, text="[动画表情]", media=media, raw_type="image")
    return RecentLine(person, False, "[动画表情]", (segment,))


def market_face(person: int, emoji_id: str = "e1") -> RecentLine:
    segment = Segment(
        SegmentKind.MARKET_FACE,
        text="[表情包:开心]",
        target=emoji_id,
        raw_type="mface",
        detail=(("emoji_id", emoji_id), ("emoji_package_id", "1"), ("key", "k")),
    )
    return RecentLine(person, False, segment.text, (segment,))


def poke(person: int) -> RecentLine:
    segment = Segment(SegmentKind.OTHER, text="[戳一戳 → 1]", target="1", raw_type="poke")
    return RecentLine(person, False, segment.text, (segment,), is_poke=True)


def with_segments(person: int, *segments: Segment) -> RecentLine:
    return RecentLine(person, False, "".join(s.text for s in segments), segments)


REPEATS: list[tuple[str, list[RecentLine]]] = [
    ("two people, same text", [said(A), said(B)]),
    ("one person twice, then another", [said(A), said(A), said(B)]),
    ("after other talk", [said(C, "别的"), said(A), said(B)]),
    ("a poke in between does not break the run", [said(A), poke(C), said(B)]),
    (
        "a recalled message in between does not break it",
        [said(A), said(C, "x", recalled=True), said(B)],
    ),
    ("surrounding whitespace does not matter", [said(A, "草 "), said(B, "草")]),
    ("the same sticker twice", [image(A), image(B)]),
    ("the same market face twice, repeated as a market face", [market_face(A), market_face(B)]),
    (
        "an earlier, finished run the bot joined",
        [said(A), said(B), said(BOT), said(C, "新"), said(A, "新")],
    ),
    (
        "a quote is not part of the content",
        [
            with_segments(
                A, Segment(SegmentKind.REPLY, target="7"), Segment(SegmentKind.TEXT, text="+1")
            ),
            said(B, "+1"),
        ],
    ),
]

SILENT: list[tuple[str, list[RecentLine]]] = [
    ("nothing", []),
    ("one message", [said(A)]),
    ("one person twice", [said(A), said(A)]),
    ("different text", [said(A), said(B, "不一样")]),
    ("third person: this run was already repeated", [said(A), said(B), said(C)]),
    ("the bot already said it", [said(A), said(B), said(BOT), said(C)]),
    ("the bot started it", [said(BOT), said(A), said(B)]),
    ("the newest is the bot's own", [said(A), said(BOT)]),
    ("the newest is a poke", [said(A), said(B), poke(C)]),
    ("the newest was recalled", [said(A), said(B, recalled=True)]),
    ("the newest is silenced by rage", [said(A), said(B, suppressed=True)]),
    ("a recalled first message does not count", [said(A, recalled=True), said(B)]),
    ("empty text", [said(A, " "), said(B, " ")]),
    ("different stickers share a label", [image(A, "a.gif"), image(B, "b.gif")]),
    ("different market faces share a label", [market_face(A, "e1"), market_face(B, "e2")]),
    ("a sticker and its label typed as text", [said(A, "[动画表情]"), image(B)]),
    (
        "a picture the platform gave no URL for (nothing to send it from)",
        [
            with_segments(p, Segment(SegmentKind.IMAGE, text="[图片]", media=MediaRef(file="x")))
            for p in (A, B)
        ],
    ),
    ("a run broken by other talk", [said(A), said(C, "插一句"), said(B)]),
    (
        "an @-mention is not repeated",
        [
            with_segments(
                p,
                Segment(SegmentKind.AT, text="@x", target="9"),
                Segment(SegmentKind.TEXT, text=" 出来"),
            )
            for p in (A, B)
        ],
    ),
    (
        "a card is not repeated",
        [
            with_segments(p, Segment(SegmentKind.CARD, text="[卡片]", raw_type="json"))
            for p in (A, B)
        ],
    ),
    (
        "a run as long as the window may have started before it",
        [*[said(A)] * (REPEAT_WINDOW - 1), said(B)],
    ),
]


@pytest.mark.parametrize(("case", "recent"), REPEATS, ids=[c for c, _ in REPEATS])
def test_repeats(case: str, recent: list[RecentLine]) -> None:
    decision = decide_repeat(recent)
    assert decision is not None, case
    newest = recent[-1]
    expected = tuple(s for s in newest.segments if s.kind is not SegmentKind.REPLY)
    assert decision == Repeat(expected, newest.text)


@pytest.mark.parametrize(("case", "recent"), SILENT, ids=[c for c, _ in SILENT])
def test_stays_silent(case: str, recent: list[RecentLine]) -> None:
    assert decide_repeat(recent) is None, case


def test_each_message_of_a_run_is_judged_once_and_only_one_repeats() -> None:
    run = [said(A), said(B), said(C), said(A), said(B)]
    repeats = [decide_repeat(run[: i + 1]) is not None for i in range(len(run))]
    assert repeats == [False, True, False, False, False]


def test_a_run_shorter_than_the_window_still_repeats_when_the_window_is_full() -> None:
    before = [said(C, f"闲聊 {i}") for i in range(REPEAT_WINDOW - 2)]
    assert decide_repeat([*before, said(A), said(B)]) is not None


def test_silenced_earlier_lines_still_count_toward_the_run() -> None:
    # Rage silence stops the bot answering a message; it does not unsay the message.
    assert decide_repeat([said(A, suppressed=True), said(B)]) is not None
