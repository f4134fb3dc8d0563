"""Keyword terms for recall, the same on every database.

Chinese words are mostly two characters and unsegmented text has no spaces, so a run of CJK
characters is indexed as its overlapping bigrams ("吃榴莲" -> 吃榴, 榴莲): a two-character
query such as "榴莲" is one exact term. A lone CJK character stands for itself. Latin words
and numbers are kept whole, lower-cased. No dictionary, no locale: what matches on SQLite
matches on PostgreSQL.
"""

from __future__ import annotations

import re
import unicodedata

MAX_TERM_CHARS = 32
# CJK ideographs (with extension A and compatibility), kana and hangul.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_RUNS = re.compile(rf"[{_CJK}]+|[a-z0-9]+")
_IS_CJK = re.compile(rf"[{_CJK}]")


def index_terms(text: str) -> frozenset[str]:
    """The terms a text is found by (and, for a query, the terms it looks for)."""
    normal = unicodedata.normalize("NFKC", text).lower()
    terms: set[str] = set()
    for run in _RUNS.findall(normal):
        if _IS_CJK.match(run):
            terms.update(_bigrams(run))
        elif len(run) > 1 or run.isdigit():
            terms.add(run[:MAX_TERM_CHARS])
    return frozenset(terms)


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two term sets (0 when both are empty)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0
