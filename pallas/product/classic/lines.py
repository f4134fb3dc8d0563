"""Learned lines, the pure rules: what a line is as a key, which pairs of consecutive lines
may be learned, which learned answer (if any) to say, and what a ban looks like.

Time and the random roll are passed in; nothing here reads the store.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pallas.core.inbound import Segment, SegmentKind
from pallas.product.teaching.guard import find_vulgar, normalise

MAX_CONTEXT_CHARS = 60  # longer messages are conversation, not a formula the group repeats
MAX_ANSWER_CHARS = 80
# Tone marks do not make another line: "早", "早~" and "早！" are one context (and one ban).
_PUNCTUATION = re.compile(r"[~～!！?？。.,，、…·\-—_]+")
PAIR_GAP_S = 120.0  # an answer comes soon after its context, or it answers something else
# What a learned answer may hold: words, QQ faces, pictures the platform can send again.
_SAYABLE = frozenset({SegmentKind.TEXT, SegmentKind.FACE, SegmentKind.IMAGE})


@dataclass(frozen=True)
class Line:
    """One member's message as learning sees it."""

    key: str  # "" when the line can be neither a context nor an answer
    text: str
    sender: int  # person id
    at: float  # seconds, any clock
    sayable: bool  # may be said back as an answer
    to_bot: bool = False  # an @ of the bot or a reply to it: a call, not talk to learn from
    message_id: int = 0  # its row in the timeline (a recall before the flush unlearns it)


def key_of(text: str, segments: Sequence[Segment]) -> str:
    """The line as learning compares it: its words (spacing ignored, case folded) and the
    identity of each face and picture; "" for what is not learnable (mentions, files...)."""
    parts: list[str] = []
    for seg in segments:
        if seg.kind is SegmentKind.REPLY:
            continue
        if seg.kind is SegmentKind.TEXT:
            parts.append(_PUNCTUATION.sub("", "".join(seg.text.split())).casefold())
        elif seg.kind is SegmentKind.FACE and seg.target:
            parts.append(f"[face:{seg.target}]")
        elif seg.kind is SegmentKind.IMAGE and seg.media is not None and seg.media.file:
            parts.append(f"[image:{seg.media.file}]")  # QQ names a picture by its content
        else:
            return ""
    key = "".join(parts)
    if not key or len(text) > MAX_CONTEXT_CHARS or find_vulgar(normalise(text)) is not None:
        return ""
    return key


def sayable(segments: Sequence[Segment]) -> bool:
    parts = [seg for seg in segments if seg.kind is not SegmentKind.REPLY]
    return bool(parts) and all(
        seg.kind in _SAYABLE
        and (seg.kind is not SegmentKind.IMAGE or (seg.media is not None and bool(seg.media.url)))
        and (seg.kind is not SegmentKind.FACE or bool(seg.target))
        for seg in parts
    )


def learnable(context: Line | None, answer: Line) -> bool:
    """Two consecutive member lines make a pair: different people, close in time, neither a
    call to the bot, the answer one the bot could say back."""
    return (
        context is not None
        and bool(context.key)
        and bool(answer.key)
        and context.sender != answer.sender
        and not context.to_bot
        and not answer.to_bot
        and answer.sayable
        and len(answer.text) <= MAX_ANSWER_CHARS
        and 0 <= answer.at - context.at <= PAIR_GAP_S
    )


def hashed(key: str) -> str:
    """A fixed-width index key for a line key (a context's lookup is one index search)."""
    return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class AnswerRules:
    min_count: int = 3  # a pair seen this often ...
    min_answerers: int = 2  # ... from this many people is always answered
    chance_per_sighting: float = 0.1  # a weaker pair: this much per sighting, at most half
    other_groups_min_count: int = 10  # what other groups taught needs this much more
    cooldown_s: float = 30.0  # at most one learned answer per group in this long


@dataclass(frozen=True)
class Candidate:
    pair_id: int
    count: int
    answerers: int
    here: bool  # learned in this group
    segments: tuple[dict[str, object], ...]
    text: str
    answer_hash: str = ""  # what a ban of the said line names


def chance(candidate: Candidate, rules: AnswerRules) -> float:
    if not candidate.here and (
        candidate.count < rules.other_groups_min_count
        or candidate.answerers < rules.min_answerers
    ):
        return 0.0  # another group's pair: many sightings, and from several people
    if candidate.count >= rules.min_count and candidate.answerers >= rules.min_answerers:
        return 1.0
    if candidate.count < 2:
        return 0.0  # said once is a chance, not the group's habit
    return min(0.5, rules.chance_per_sighting * candidate.count)


def choose(
    candidates: Sequence[Candidate],
    rules: AnswerRules,
    roll: float,
    since_last_answer_s: float | None,
) -> Candidate | None:
    """The answer to say now, or None: cooling down, nothing learned, or the roll lost.
    The best established pair first (most answerers, then most sightings)."""
    if since_last_answer_s is not None and since_last_answer_s < rules.cooldown_s:
        return None
    ranked = sorted(
        candidates, key=lambda c: (chance(c, rules), c.answerers, c.count), reverse=True
    )
    if not ranked or chance(ranked[0], rules) <= roll:
        return None
    return ranked[0]


def is_ban(text: str, ban_words: Sequence[str]) -> bool:
    """Exactly a ban word (spacing and a trailing 。！ ignored), never one inside a sentence."""
    said = "".join(text.split()).rstrip("。！!.")
    return bool(said) and said in {"".join(w.split()) for w in ban_words}


def segments_json(segments: Sequence[Segment]) -> tuple[dict[str, object], ...]:
    return tuple(seg.to_json() for seg in segments if seg.kind is not SegmentKind.REPLY)


def roll_of(seed: str, message_id: int) -> float:
    digest = hashlib.blake2b(f"{seed}:{message_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64
