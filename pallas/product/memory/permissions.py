"""Who may add to and change what the bot remembers (docs/memory.md, "Who may change group
knowledge"): pure decisions from the entry, the askers and their rank.

- A person's fact is theirs: they, or whoever taught it, may reword or forget it; an admin
  may have it forgotten (to take a wrong or hurtful entry down), never reworded.
- Group knowledge (a group fact, a behaviour, an episode) is changed or forgotten only by
  whoever taught it, a group admin or owner, or the bot's owner.
- A plain member's group fact or behaviour is only heard: it waits, never recalled, until a
  second member says it or an admin teaches it (`kept_as_heard`).
- The bot's owner may do anything but move a behaviour or an episode onto a person.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import IntEnum, StrEnum
from typing import Protocol

from pallas.core.facts import MemoryKind

ADMIN_ROLES = frozenset({"owner", "admin"})  # the group's owner and admins (OneBot roles)


class Rank(IntEnum):
    MEMBER = 0
    ADMIN = 1  # the group's owner or an admin
    OWNER = 2  # the bot's owner (SUPERUSERS)


class Change(StrEnum):
    EDIT = "edit"  # reword
    MOVE = "move"  # change whom a fact is about
    FORGET = "forget"


class Entry(Protocol):
    @property
    def kind(self) -> MemoryKind: ...
    @property
    def person_id(self) -> int | None: ...
    @property
    def taught_by(self) -> int | None: ...


def rank_of(roles: Collection[str], owner: bool) -> Rank:
    """The askers' rank: the bot's owner's when one of them is the owner; an admin's only
    when every asker holds an admin role (`roles`: one per asker), so a member writing in the
    same batch as an admin does not borrow the admin's rank."""
    if owner:
        return Rank.OWNER
    if roles and all(role in ADMIN_ROLES for role in roles):
        return Rank.ADMIN
    return Rank.MEMBER


def is_group_level(entry: Entry) -> bool:
    """About the group or the bot's behaviour rather than one person."""
    return entry.person_id is None or entry.kind is MemoryKind.BEHAVIOR


def kept_as_heard(kind: MemoryKind, about: int | None, rank: Rank) -> bool:
    """A plain member's group fact or behaviour waits for a second member."""
    return rank is Rank.MEMBER and about is None and kind in (MemoryKind.FACT, MemoryKind.BEHAVIOR)


def may_change(
    change: Change,
    entry: Entry,
    askers: Collection[int],
    rank: Rank,
    target: int | None = None,
) -> bool:
    """Whether askers of this rank may make `change` to `entry`; `target` is whom a move
    makes it about (None: the group)."""
    taught = entry.taught_by is not None and entry.taught_by in askers
    subject = entry.person_id is not None and entry.person_id in askers
    if change is Change.MOVE:
        return _may_move(entry, askers, rank, target, taught=taught, subject=subject)
    if rank is Rank.OWNER or taught:
        return True
    if is_group_level(entry):
        return rank is Rank.ADMIN
    return subject or (change is Change.FORGET and rank is Rank.ADMIN)


def _may_move(
    entry: Entry,
    askers: Collection[int],
    rank: Rank,
    target: int | None,
    *,
    taught: bool,
    subject: bool,
) -> bool:
    if entry.kind is not MemoryKind.FACT:
        return False
    if rank is Rank.OWNER or subject:  # "不是我，是小红": its subject hands it on
        return True
    # A group fact claimed as one's own: only by who taught it or an admin.
    return entry.person_id is None and target in askers and (taught or rank is Rank.ADMIN)


__all__ = [
    "Change",
    "Rank",
    "is_group_level",
    "kept_as_heard",
    "may_change",
    "rank_of",
]
