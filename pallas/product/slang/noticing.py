"""Noticing a group's own words, and how its people answer each other: pure, cheap, no model.

  new lines -> (simplified) texts -> known terms counted where they occur again
            -> CJK n-grams (2-6) and Latin shorthand said in 2+ lines of this run
            -> not ordinary (reference.py), not a member's name, not a number,
               closed at both ends, the longest of the ones said in the same lines
            -> at most MAX_SIGHTINGS, the most widely used first

"Closed" is the small-corpus stand-in for a word boundary: a true term is preceded (and
followed) by different characters, or by the edge of a clause, where it occurs; 哼酱 in
嗯哼酱 is always preceded by 嗯, so it is part of something longer.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

MIN_N, MAX_N = 2, 6
MAX_RUN_CHARS = 60  # a longer run is a paste: its n-grams are not talk
MAX_LINE_CHARS = 200
MAX_TYPES = 5_000  # distinct n-grams counted per run: a busy group's run stays bounded
MAX_SIGHTINGS = 50
EVIDENCE_IDS = 6
MIN_NEW_LINES = 2  # a new term must be said in this many lines of one run

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# Latin shorthand stands alone: a longer word ("internationalization") is not cut into terms.
_TOKENS = re.compile(rf"[{_CJK}]+|(?<![a-z0-9])[a-z][a-z0-9]{{1,11}}(?![a-z0-9])")
_NUMBER = re.compile(r"[0-9]{5,}")  # a QQ number, a phone number: never a term
_IS_CJK = re.compile(rf"[{_CJK}]")
_SKIPPED = re.compile(r"^\s*[/!！#]|https?://|\[[^\]]{1,8}\]")  # commands, links, shares
LATIN_STOP = frozenset(
    (
        *("ok", "okay", "the", "and", "you", "are", "is", "it", "to", "of", "in", "on"),
        *("for", "at", "me", "my", "no", "yes", "hi", "hello", "bye", "lol", "haha"),
        *("qq", "wx", "vx", "bot", "http", "https", "www", "com", "cn", "png", "jpg"),
        *("gif", "mp4", "pdf"),
    )
)


@dataclass(frozen=True)
class Line:
    """A member's line as noticing reads it (its text already simplified)."""

    message_id: int
    user_id: str
    text: str
    reply_to_id: int | None = None  # our id of the line it quotes; 0: a line not shown


@dataclass(frozen=True)
class Sighting:
    term: str
    message_ids: tuple[int, ...]  # the newest lines it was used in, at most EVIDENCE_IDS
    user_ids: frozenset[str]
    lines: int  # how many lines of this run used it


@dataclass
class _Count:
    ids: list[int] = field(default_factory=list)
    users: set[str] = field(default_factory=set)
    left: set[str] = field(default_factory=set)
    right: set[str] = field(default_factory=set)


def talk(lines: Iterable[Line]) -> list[Line]:
    """Lines worth reading: not commands, links, shares or pastes."""
    return [ln for ln in lines if ln.text and len(ln.text) <= MAX_LINE_CHARS
            and not _SKIPPED.search(ln.text)]  # fmt: skip


def notice(
    lines: Sequence[Line],
    known: Iterable[str],
    is_ordinary: Callable[[str], bool],
    names: Iterable[str] = (),
) -> list[Sighting]:
    """What this run's lines say of the group's terms: the known ones used again, and new
    ones (see the module doc)."""
    shown = talk(lines)
    known_terms = {term for term in known if term}
    sightings = [_sighting(t, c) for t, c in _known_counts(shown, known_terms).items()]
    counts = _ngram_counts(shown)
    unwanted = {name.lower() for name in names} | known_terms
    fresh = {
        term: count
        for term, count in counts.items()
        if len(count.ids) >= MIN_NEW_LINES
        and term not in unwanted
        and not _NUMBER.search(term)
        and _closed(count)
        and not is_ordinary(term)
        and not any(k in term or term in k for k in known_terms)  # 嗯哼酱第 is 嗯哼酱 again
    }
    shorter = _one_shorter(fresh)
    sightings += [_sighting(t, c) for t, c in fresh.items() if shorter.get(t) != c.ids]
    sightings.sort(key=lambda s: (-len(s.user_ids), -s.lines, s.term))
    return sightings[:MAX_SIGHTINGS]


def _known_counts(lines: Sequence[Line], known: set[str]) -> dict[str, _Count]:
    counts: dict[str, _Count] = {}
    for line in lines:
        lowered = line.text.lower()
        for term in known:
            if term in lowered:
                count = counts.setdefault(term, _Count())
                count.ids.append(line.message_id)
                count.users.add(line.user_id)
    return counts


def _ngram_counts(lines: Sequence[Line]) -> dict[str, _Count]:
    """Newest lines first, so a busy run's bound keeps what is said now."""
    counts: dict[str, _Count] = {}
    for line in reversed(lines):
        for token in _TOKENS.finditer(line.text.lower()):
            run = token.group()
            if len(run) > MAX_RUN_CHARS:
                continue
            grams = _grams(run) if _IS_CJK.match(run) else _latin(run)
            for gram, left, right in grams:
                count = counts.get(gram)
                if count is None:
                    if len(counts) >= MAX_TYPES:
                        continue
                    count = counts[gram] = _Count()
                if not count.ids or count.ids[0] != line.message_id:
                    count.ids.insert(0, line.message_id)
                count.users.add(line.user_id)
                count.left.add(left)
                count.right.add(right)
    return counts


def _grams(run: str) -> Iterable[tuple[str, str, str]]:
    for size in range(MIN_N, min(MAX_N, len(run)) + 1):
        for start in range(len(run) - size + 1):
            end = start + size
            left = run[start - 1] if start else ""
            right = run[end] if end < len(run) else ""
            yield run[start:end], left, right


def _latin(run: str) -> Iterable[tuple[str, str, str]]:
    if run not in LATIN_STOP and not run.isdigit():
        yield run, "", ""


def _closed(count: _Count) -> bool:
    """An edge ("") anywhere, or two different neighbours, on each side."""
    return all("" in side or len(side) > 1 for side in (count.left, count.right))


def _one_shorter(fresh: dict[str, _Count]) -> dict[str, list[int]]:
    """Each fresh term's pieces one character shorter, with the lines of the longer term:
    a piece said in exactly those lines is only part of it (哼酱 of 嗯哼酱). Linear in the
    number of terms; a chain of such pieces is found link by link."""
    shorter: dict[str, list[int]] = {}
    for term, count in fresh.items():
        if len(term) > MIN_N:
            for piece in (term[1:], term[:-1]):
                if fresh.get(piece) is not None and fresh[piece].ids == count.ids:
                    shorter[piece] = count.ids
    return shorter


def _sighting(term: str, count: _Count) -> Sighting:
    ids = tuple(count.ids[-EVIDENCE_IDS:])
    return Sighting(term, ids, frozenset(count.users), len(count.ids))


# -- expression samples ---------------------------------------------------------------------

SAMPLE_MIN_CHARS, SAMPLE_MAX_CHARS = 2, 24
UNQUOTED_MAX_CHARS = 12  # an answer that quotes nothing is taken only when it is this short
_NOT_A_SAMPLE = re.compile(r"@|[0-9]{5,}|\[|【|https?://|^\s*[/!！#]")


@dataclass(frozen=True)
class SampleSeen:
    message_id: int
    text: str
    answered_id: int | None  # the line it answers: what a later pick is matched against


def samples_in(lines: Sequence[Line], answered_by: Callable[[Line], Line | None]) -> list[
    SampleSeen
]:
    """Short answers among the lines: a member quoting another's line, or a very short line
    right after someone else's. Their content is judged by the caller (memory's lexicon)."""
    found = []
    for line in lines:
        text = line.text.strip()
        if not SAMPLE_MIN_CHARS <= len(text) <= SAMPLE_MAX_CHARS or _NOT_A_SAMPLE.search(text):
            continue
        answered = answered_by(line)
        short = line.reply_to_id is not None or len(text) <= UNQUOTED_MAX_CHARS
        if answered is not None and answered.user_id != line.user_id and short:
            found.append(SampleSeen(line.message_id, text, answered.message_id))
    return found


def answered_in(lines: Sequence[Line]) -> Callable[[Line], Line | None]:
    """The line each line answers: the one it quotes, else the line just before it."""
    by_id = {line.message_id: line for line in lines}
    before = {b.message_id: a for a, b in itertools.pairwise(lines)}

    def answered(line: Line) -> Line | None:
        if line.reply_to_id is not None:
            return by_id.get(line.reply_to_id)
        return before.get(line.message_id)

    return answered
