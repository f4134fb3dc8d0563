"""The pure decisions of the slang feature: which terms are ripe to be learned, whether a
meaning the model proposes may be kept, which samples fit a reply (docs/slang.md).

A meaning is the group's usage, so the rules of memory's teaching guard hold for it: no
injection, no vulgar or belittling words, no accusations, debts, crimes, health or
sexuality. A term that is a member's name or a number (a QQ number) is not slang, and a
term nobody in the shown lines used has no usage to learn from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pallas.core.facts import MemoryKind
from pallas.core.terms import index_terms, overlap
from pallas.product.teaching.guard import Teaching, judge_teaching

MAX_TERM_CHARS = 16
MAX_MEANING_CHARS = 60
MAX_OFFERS = 2  # times an unlearned term is offered before it is left alone
RELEARN_AFTER = timedelta(days=7)


@dataclass(frozen=True)
class Ripeness:
    min_lines: int = 3
    min_members: int = 2


@dataclass(frozen=True)
class TermState:
    """What ripeness reads of a stored term."""

    meaning: str | None
    source: str  # "" candidate / learned / admin / deleted
    lines: int
    members: int
    offers: int
    offered_lines: int
    learned_at: datetime | None
    learned_lines: int


def is_ripe(state: TermState, now: datetime, policy: Ripeness) -> bool:
    """A candidate used enough, by enough people, and grown since it was last offered; a
    learned term whose use has doubled since, a week or more later (usage shifts)."""
    if state.lines < policy.min_lines or state.members < policy.min_members:
        return False
    if state.source == "":
        grown = state.offers == 0 or state.lines >= state.offered_lines + policy.min_lines
        return state.offers < MAX_OFFERS and grown
    if state.source != "learned" or state.learned_at is None:
        return False  # an admin's meaning or a deleted term is never relearned
    since = state.lines - max(state.learned_lines, state.offered_lines)
    aged = now - state.learned_at >= RELEARN_AFTER
    return aged and since >= max(10, state.learned_lines)


def term_refusal(term: str, names: Iterable[str], used_in: Sequence[str]) -> str | None:
    """Why `term` (simplified, lower-cased) is no term of the group's, or None."""
    if not term or len(term) > MAX_TERM_CHARS:
        return "the term is empty or too long"
    if term.replace(" ", "").isdigit() or re.search(r"[0-9]{5,}", term):
        return "the term is a number"
    if term in {name.lower() for name in names if name}:
        return "the term is a member's name"
    if not any(term in text.lower() for text in used_in):
        return "nobody in the shown lines used the term"
    return None


def meaning_refusal(term: str, meaning: str, now: datetime) -> str | None:
    """Why a meaning may not be kept, or None: memory's content and people rules."""
    meaning = meaning.strip()
    if not meaning or len(meaning) > MAX_MEANING_CHARS:
        return "the meaning is empty or too long"
    if meaning.lower() == term:
        return "the meaning only repeats the term"
    verdict = judge_teaching(
        Teaching(text=f"{term}：{meaning}", source_text="", author_person_id=0,
                 about_person_id=None, kind=MemoryKind.FACT, author_is_owner=True),
        (), now,
    )  # fmt: skip
    return None if verdict.allowed else verdict.detail


def confidence(lines: int, members: int) -> float:
    """How sure the usage is: more lines and more people, up to 1."""
    return round(min(1.0, 0.2 + 0.05 * min(lines, 10) + 0.1 * min(members, 3)), 2)


def terms_in(texts: Iterable[str], meanings: dict[str, str]) -> list[str]:
    """The learned terms the texts use, longest first (嗯哼酱 before 嗯哼)."""
    joined = "\n".join(texts).lower()
    return sorted((t for t in meanings if t in joined), key=lambda t: (-len(t), t))


# -- samples --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SampleChoice:
    id: int
    text: str
    cue: str
    weight: float


def pick_samples(
    samples: Sequence[SampleChoice], said: str, count: int = 3
) -> list[SampleChoice]:
    """The samples that fit what was just said: their cue shares its words, and the ones
    that landed well weigh more; then the heaviest, each text once."""
    wanted = index_terms(said)
    scored = sorted(
        samples,
        key=lambda s: (-(overlap(wanted, index_terms(s.cue)) * 10 + min(s.weight, 5) / 2), s.id),
    )
    picked: list[SampleChoice] = []
    for sample in scored:
        if sample.text not in {p.text for p in picked}:
            picked.append(sample)
        if len(picked) == count:
            break
    return picked
