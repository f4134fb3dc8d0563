"""Who may change what the bot remembers: one row per entry, asker, rank and change."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pallas.core.facts import MemoryKind
from pallas.product.memory.permissions import Change, Rank, kept_as_heard, may_change, rank_of

MING, HONG, QIANG = 1, 2, 3
FACT, BEHAVIOR, EPISODE = MemoryKind.FACT, MemoryKind.BEHAVIOR, MemoryKind.EPISODE
MEMBER, ADMIN, OWNER = Rank.MEMBER, Rank.ADMIN, Rank.OWNER
EDIT, MOVE, FORGET = Change.EDIT, Change.MOVE, Change.FORGET


@dataclass(frozen=True)
class E:
    kind: MemoryKind
    person_id: int | None
    taught_by: int | None


MINGS_OWN = E(FACT, MING, MING)  # 明 said it about himself
GROUP_BY_MING = E(FACT, None, MING)  # a group fact 明 taught
BEHAVIOUR_BY_MING = E(BEHAVIOR, None, MING)
EPISODE_BY_NOBODY = E(EPISODE, None, None)
OWNER_WROTE_ABOUT_MING = E(FACT, MING, None)

TABLE = [
    # a person's fact: theirs
    (MINGS_OWN, EDIT, MING, MEMBER, None, True),
    (MINGS_OWN, FORGET, MING, MEMBER, None, True),
    (MINGS_OWN, EDIT, HONG, MEMBER, None, False),
    (MINGS_OWN, FORGET, HONG, MEMBER, None, False),
    (MINGS_OWN, EDIT, HONG, ADMIN, None, False),  # an admin takes it down, never rewords it
    (MINGS_OWN, FORGET, HONG, ADMIN, None, True),
    (MINGS_OWN, EDIT, HONG, OWNER, None, True),
    (OWNER_WROTE_ABOUT_MING, FORGET, MING, MEMBER, None, True),
    # moving a fact: its subject or the owner
    (MINGS_OWN, MOVE, MING, MEMBER, HONG, True),  # "不是我，是小红"
    (MINGS_OWN, MOVE, HONG, MEMBER, HONG, False),
    (MINGS_OWN, MOVE, HONG, ADMIN, HONG, False),
    (MINGS_OWN, MOVE, QIANG, OWNER, HONG, True),
    # group knowledge: its teacher, an admin, the owner; never another member
    (GROUP_BY_MING, EDIT, MING, MEMBER, None, True),
    (GROUP_BY_MING, FORGET, MING, MEMBER, None, True),
    (GROUP_BY_MING, EDIT, HONG, MEMBER, None, False),
    (GROUP_BY_MING, FORGET, HONG, MEMBER, None, False),
    (GROUP_BY_MING, EDIT, HONG, ADMIN, None, True),
    (GROUP_BY_MING, FORGET, HONG, ADMIN, None, True),
    (GROUP_BY_MING, FORGET, HONG, OWNER, None, True),
    (GROUP_BY_MING, MOVE, HONG, MEMBER, HONG, False),  # claiming it as one's own
    (GROUP_BY_MING, MOVE, MING, MEMBER, MING, True),
    (GROUP_BY_MING, MOVE, HONG, ADMIN, HONG, True),
    (BEHAVIOUR_BY_MING, FORGET, HONG, MEMBER, None, False),
    (BEHAVIOUR_BY_MING, EDIT, HONG, MEMBER, None, False),
    (BEHAVIOUR_BY_MING, FORGET, MING, MEMBER, None, True),
    (BEHAVIOUR_BY_MING, FORGET, HONG, ADMIN, None, True),
    (BEHAVIOUR_BY_MING, MOVE, MING, OWNER, HONG, False),  # only facts are about someone
    (EPISODE_BY_NOBODY, FORGET, HONG, MEMBER, None, False),
    (EPISODE_BY_NOBODY, FORGET, HONG, ADMIN, None, True),
]


@pytest.mark.parametrize(("entry", "change", "asker", "rank", "target", "allowed"), TABLE)
def test_who_may_change_what(
    entry: E, change: Change, asker: int, rank: Rank, target: int | None, allowed: bool
) -> None:
    assert may_change(change, entry, {asker}, rank, target) is allowed


@pytest.mark.parametrize(
    ("kind", "about", "rank", "heard"),
    [
        (FACT, None, MEMBER, True),  # a member's group fact waits for a second member
        (BEHAVIOR, None, MEMBER, True),
        (FACT, None, ADMIN, False),
        (BEHAVIOR, None, OWNER, False),
        (FACT, MING, MEMBER, False),  # a fact about oneself is kept at once
        (EPISODE, None, MEMBER, False),
    ],
)
def test_what_a_member_teaches_the_group_waits(
    kind: MemoryKind, about: int | None, rank: Rank, heard: bool
) -> None:
    assert kept_as_heard(kind, about, rank) is heard


def test_rank_is_an_admins_only_when_every_asker_is_one() -> None:
    assert rank_of([], False) is MEMBER
    assert rank_of(["member", "admin"], False) is MEMBER  # no borrowing an admin's rank
    assert rank_of(["admin", "owner"], False) is ADMIN
    assert rank_of(["owner"], False) is ADMIN  # the group's owner
    assert rank_of(["", "admin"], False) is MEMBER  # an asker of unknown role
    assert rank_of(["member"], True) is OWNER  # the bot's owner
