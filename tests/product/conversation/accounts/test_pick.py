"""Which account answers and which one speaks for a group (pure; docs/accounts.md)."""

from __future__ import annotations

from collections import Counter

from pallas.product.conversation.accounts.pick import (
    Addressed,
    GroupAccountsView,
    answerer_of,
    speaker_of,
)

A, B, C = "52001", "52002", "52003"
OURS = frozenset({A, B, C})
NAMES = {B: ("小二",), C: ("小三", "三号")}


def view(
    group: str = "9100", present: set[str] = OURS, connected: set[str] = OURS
) -> GroupAccountsView:
    return GroupAccountsView(group, frozenset(present), frozenset(connected))


def test_the_speaker_is_stable_per_group_and_spreads_groups_over_accounts() -> None:
    picks = {g: speaker_of(view(str(g))) for g in range(1000, 1300)}
    assert all(speaker_of(view(str(g))) == picks[g] for g in picks)  # the same every time
    counts = Counter(picks.values())
    assert set(counts) == OURS and min(counts.values()) > 60  # about a third each


def test_when_the_speaker_goes_only_its_groups_move() -> None:
    before = {g: speaker_of(view(str(g))) for g in range(1000, 1300)}
    after = {g: speaker_of(view(str(g), connected={A, C})) for g in before}
    moved = {g for g in before if before[g] != after[g]}
    assert moved == {g for g in before if before[g] == B}
    # Nobody connected: still one of those in the group (its replies wait for it).
    assert speaker_of(view("1000", connected=set())) in OURS
    assert speaker_of(view("1000", present=set(), connected=set()), fallback=A) == A


def test_an_at_or_an_exclusive_name_hands_the_reply_to_its_account() -> None:
    group = view()
    speaker = speaker_of(group)
    assert answerer_of(Addressed(A, (), "大家好"), group, OURS, NAMES) == speaker
    assert answerer_of(Addressed(A, ("8000", B), "你好"), group, OURS, NAMES) == B
    assert answerer_of(Addressed(A, (), "小三 在吗"), group, OURS, NAMES) == C
    assert answerer_of(Addressed(A, (), "三号呢"), group, OURS, NAMES) == C
    # An @ of a member who is not the bot changes nothing.
    assert answerer_of(Addressed(A, ("8000",), "你好"), group, OURS, NAMES) == speaker
    # An exclusive name of an account not in the group is nobody's call here.
    away = view(present={A, B}, connected={A, B})
    assert answerer_of(Addressed(A, (), "小三 在吗"), away, OURS, NAMES) == speaker_of(away)
