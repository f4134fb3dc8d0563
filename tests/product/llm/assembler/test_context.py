"""Context assembly pieces that decide what the model sees (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from pallas.core.inbound import StreamKind
from pallas.product.conversation.delivery.contract import should_quote
from pallas.product.llm.assembler.context import (
    ContextBlock,
    ContextLine,
    fit_to_budget,
    line_tokens,
    named_mentions,
    present_people,
    to_context_lines,
)
from pallas.store.conversation import WindowLine

T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def line(
    message_id: int, text: str = "x" * 40, *, batch: bool = False, speaker: str = "A"
) -> ContextLine:
    return ContextLine(
        message_id, f"p{message_id}", speaker, "42", False, text, T, batch, None, False, False
    )


def test_the_budget_drops_the_oldest_history_first_and_never_the_batch() -> None:
    lines = [line(i) for i in range(1, 11)] + [line(11, "y" * 4000, batch=True)]
    kept, _ = fit_to_budget(lines, [], budget=line_tokens(lines[0]) * 3)
    assert [item.message_id for item in kept] == [11]
    roomy, _ = fit_to_budget(lines, [], budget=10**6)
    assert len(roomy) == 11
    some, _ = fit_to_budget(lines, [], budget=sum(map(line_tokens, lines)) - 1)
    assert [item.message_id for item in some] == list(range(2, 12))


def test_blocks_go_after_history_lowest_priority_first() -> None:
    lines = [line(1), line(2, batch=True)]
    blocks = [
        ContextBlock("memory", "m", "记" * 50, priority=2),
        ContextBlock("schedule", "s", "日" * 50, priority=1),
    ]
    budget = line_tokens(lines[1]) + 50
    kept_lines, kept_blocks = fit_to_budget(lines, blocks, budget)
    assert [item.message_id for item in kept_lines] == [2]
    assert [b.source for b in kept_blocks] == ["memory"]


def test_present_people_are_the_most_recent_speakers_first() -> None:
    lines = [line(1, speaker="甲"), line(2, speaker="乙"), line(3, speaker="甲")]
    assert present_people(lines) == ("甲", "乙")


def test_the_quote_rule() -> None:
    assert should_quote(StreamKind.GROUP, 10, newest_id=12)
    assert not should_quote(StreamKind.GROUP, 12, newest_id=12)
    assert not should_quote(StreamKind.GROUP, None, newest_id=12)
    assert not should_quote(StreamKind.PRIVATE, 10, newest_id=12)


def window_line(text: str, mentions: tuple[str, ...], *, is_poke: bool = False) -> WindowLine:
    return WindowLine(
        1, "p1", 5, "四号", "42", False, text, T, None, is_poke, False, "admin", mentions
    )


def test_mentions_and_poke_targets_are_shown_by_name() -> None:
    names = {"43": "小三", "10000": "帕拉斯"}
    (line,) = to_context_lines(
        [window_line("@10000 问问@43 和 @430 去不去", ("10000", "43", "430"))], frozenset(), names
    )
    assert line.text == "@帕拉斯 问问@小三 和 @430 去不去"  # 430 is unknown: its number stays
    assert line.role == "admin" and line.speaker == "四号"
    (poke,) = to_context_lines(
        [window_line("[戳一戳 → 43]", ("43",), is_poke=True)], frozenset(), names
    )
    assert poke.text == "[戳一戳 → 小三]"


def test_a_name_that_looks_like_a_pattern_is_inserted_literally() -> None:
    assert named_mentions("@43 好", ("43",), {"43": r"\1 $&"}) == r"@\1 $& 好"
