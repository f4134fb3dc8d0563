"""The bot's mood (pure rules): mood events from its own replies move a valence in [-1, 1],
which drifts back to calm; a group's events weigh less than a private chat's.

A reply's `[心情:…]` marker is a mood event (agent/output.py takes it out of the text). Words
the model may use map to a push; unknown words push nothing. The mood colours the tone of the
next turns as one short line of fixed text; it never comes from what anyone else wrote.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

HALF_LIFE = timedelta(hours=3)
PUSH = 0.3
GROUP_WEIGHT = 0.5  # a group's mood events count half: one chat of many
# Words a mood marker may carry, and which way they push.
_UP = ("开心", "高兴", "愉快", "兴奋", "得意", "满足", "舒服", "期待", "好", "乐")
_DOWN = ("难过", "伤心", "生气", "烦", "无语", "委屈", "累", "郁闷", "失落", "气", "丧")


def push_of(word: str) -> float:
    """+PUSH, -PUSH or 0 for one mood word (the longest known word it contains decides)."""
    up = max((len(w) for w in _UP if w in word), default=0)
    down = max((len(w) for w in _DOWN if w in word), default=0)
    if up == down:
        return 0.0
    return PUSH if up > down else -PUSH


def settled(valence: float, since: datetime, now: datetime) -> float:
    elapsed = max(0.0, (now - since).total_seconds())
    return valence * 0.5 ** (elapsed / HALF_LIFE.total_seconds())


def moved(
    valence: float, since: datetime, now: datetime, words: Iterable[str], weight: float
) -> float:
    """The mood after these events at `now` (weight: 1 in private, the group weight in groups)."""
    value = settled(valence, since, now) + weight * sum(push_of(w) for w in words)
    return max(-1.0, min(1.0, value))


def mood_line(valence: float) -> str:
    if valence >= 0.5:
        return "心情很好"
    if valence >= 0.15:
        return "心情不错"
    if valence > -0.15:
        return ""
    if valence > -0.5:
        return "心情有点低落"
    return "心情很差，话少"
