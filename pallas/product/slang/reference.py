"""What counts as an ordinary word: jieba's dictionary (349k words with frequencies, the
reference Chinese bots use) read once, kept compact, and OpenCC's traditional-to-simplified
conversion, so 嗯哼醬 and 嗯哼酱 are one term and a traditional everyday word is still
ordinary.

Only the dictionary file is read: jieba's segmenter is never imported. The words are kept as
their sorted hashes (about 3 MB; the process grows by about 14 MB in all, instead of the
40 MB a set of 337k strings takes) and looked up by bisection in half a microsecond.
"""

from __future__ import annotations

import importlib.util
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import opencc

MAX_WORD_CHARS = 8
COMMON_CHAR_FREQUENCY = 1_500  # a single character this frequent is an everyday piece (猫, 见)
# Single characters that join ordinary words into ordinary phrases (我觉得, 的时候, 是不是):
# pronouns, particles, negations, measure words and the like.
FUNCTION_CHARS = frozenset(
    "的了着过是在有和与跟同及或就都也还又才再很太真挺最更好不没别无未这那哪个些每各某一"
    "我你他她它们咱俺自己谁啥什么怎为被把给让对向从往到于以而且但却则并吗呢吧啊呀哦噢嘛啦"
    "咯哈嘿呵嗯哼唉诶欸哇喔呃额喽呐呗么之其此该得地要会能可想去来上下里中大小多少几点个次"
)
# What a term of the group's seldom starts or ends with: a piece cut out of a sentence
# (去吃, 吃了, 的猫今天) does. Interjections and the nickname prefixes (小, 大, 老, 阿) may.
EDGE_CHARS = FUNCTION_CHARS - frozenset(
    "嗯哼哈嘿呵唉诶欸哇喔呃额啊呀哦噢喽呐呗大小多少几点个次上下中"
)


class Dictionary:
    """A word list kept as the sorted hashes of its words (8 bytes a word; a chance of a
    false "known" about one in 10^13 per lookup), searched by bisection."""

    def __init__(self, words: Iterable[str]) -> None:
        self._hashes = array("q", sorted({hash(word) for word in words}))

    def __len__(self) -> int:
        return len(self._hashes)

    def __contains__(self, word: object) -> bool:
        if not isinstance(word, str) or not word:
            return False
        wanted = hash(word)
        index = bisect_left(self._hashes, wanted)
        return index < len(self._hashes) and self._hashes[index] == wanted


def jieba_dictionary_path() -> Path:
    """jieba's dict.txt, found without importing jieba (its import has side effects)."""
    spec = importlib.util.find_spec("jieba")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("jieba is not installed: the slang feature needs its dictionary")
    return Path(next(iter(spec.submodule_search_locations))) / "dict.txt"


@dataclass(frozen=True)
class Reference:
    words: Dictionary  # words of 2 to 8 characters
    common_chars: frozenset[str]  # single characters of everyday use


@cache
def ordinary_words() -> Reference:
    """The reference, read on first use (about 0.4 s)."""
    common: set[str] = set()

    def words(lines: Iterable[str]) -> Iterator[str]:
        for line in lines:
            word, frequency = line.split(" ", 2)[:2]
            if 2 <= len(word) <= MAX_WORD_CHARS:
                yield word.lower()
            elif len(word) == 1 and int(frequency) >= COMMON_CHAR_FREQUENCY:
                common.add(word)

    with jieba_dictionary_path().open(encoding="utf-8") as lines:
        dictionary = Dictionary(words(lines))
    return Reference(dictionary, frozenset(common))


@cache
def _converter() -> opencc.OpenCC:
    return opencc.OpenCC("t2s")


def simplified(text: str) -> str:
    return str(_converter().convert(text)) if text else text


def is_ordinary(term: str, reference: Reference) -> bool:
    """Not a term of the group's: a dictionary word; a piece that starts or ends like a cut
    sentence (去吃, 吃了); or a phrase of dictionary words, function characters and everyday
    characters with at least one dictionary word in it (明天见 = 明天 + 见), or of function
    characters alone (嗯哼, 哈哈哈). 嗯哼酱 is none of these: 酱 is no everyday character."""
    words = reference.words
    if term in words or term[0] in EDGE_CHARS or term[-1] in EDGE_CHARS:
        return True
    if all(char in FUNCTION_CHARS for char in term):
        return True
    # reachable[i]: (the first i characters can be split, with a dictionary word among them)
    reachable: list[tuple[bool, bool]] = [(True, False)] + [(False, False)] * len(term)
    for end in range(1, len(term) + 1):
        char = term[end - 1]
        can, worded = False, False
        if (char in FUNCTION_CHARS or char in reference.common_chars) and reachable[end - 1][0]:
            can, worded = True, reachable[end - 1][1]
        for start in range(max(0, end - MAX_WORD_CHARS), end - 1):
            if reachable[start][0] and term[start:end] in words:
                can, worded = True, True
                break
        reachable[end] = (can, worded)
    return reachable[-1] == (True, True)
