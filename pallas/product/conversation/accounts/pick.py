"""Which account answers a group message, and which one speaks for a group: pure.

The speaker of a group is stable: of the accounts in the group (connected ones first), the
one ranked first by a hash of the group's number and the account's (rendezvous hashing).
Every process and every restart picks the same one, and when it goes away only its own
groups move to another account. A call addressed to one account (an @ of it, or a name only
it answers to) is that account's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from hashlib import blake2b

from pallas.product.conversation.gate.signals import names_in


@dataclass(frozen=True)
class GroupAccountsView:
    """The bot's accounts as one group sees them at a moment."""

    group: str
    present: frozenset[str]  # in the group (seen there, not removed since)
    connected: frozenset[str]  # with a live connection now


@dataclass(frozen=True)
class Addressed:
    """What a message says about whom it is for."""

    delivered_by: str  # the account whose copy arrived first
    mentions: tuple[str, ...]
    text: str


def rank(group: str, account: str) -> bytes:
    return blake2b(f"{group}:{account}".encode(), digest_size=8).digest()


def speaker_of(view: GroupAccountsView, fallback: str = "") -> str:
    """The account that speaks for the group when nobody in particular was called."""
    live = view.present & view.connected
    pool = live or view.present or frozenset({fallback} - {""})
    return max(pool, key=lambda account: (rank(view.group, account), account), default=fallback)


def answerer_of(
    message: Addressed,
    view: GroupAccountsView,
    ours: frozenset[str],
    exclusive: Mapping[str, tuple[str, ...]],
) -> str:
    """The account that answers the message: the first of ours it @s, else the one whose
    exclusive name it uses, else the group's speaker."""
    for user in message.mentions:
        if user in ours:
            return user
    named = _named(message.text, exclusive, view.present | {message.delivered_by})
    if named is not None:
        return named
    return speaker_of(view, message.delivered_by)


def _named(
    text: str, exclusive: Mapping[str, tuple[str, ...]], candidates: Iterable[str]
) -> str | None:
    for account in sorted(candidates):
        names = exclusive.get(account, ())
        if names and names_in(text, names):
            return account
    return None
