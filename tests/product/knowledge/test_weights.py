"""How a question's terms are weighed (pure): rare terms count, common ones are left out, and
words the folder never saw keep a passage sharing one word from counting as an answer."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from fastapi import HTTPException

from pallas.product.knowledge.console import upload_target
from pallas.product.knowledge.store import Frequencies, query_weight, term_weights


def frequencies(passages: int, **counts: int) -> Frequencies:
    return Frequencies(passages, Counter(counts))


def test_rare_terms_weigh_most_and_common_ones_are_left_out() -> None:
    found = frequencies(10_000, 镇花=3, 曼陀=1, 的镇=4000, 今天=9000)
    weights = term_weights(["镇花", "曼陀", "的镇", "今天"], found)
    assert set(weights) == {"镇花", "曼陀"} and weights["曼陀"] > weights["镇花"]
    only_common = term_weights(["的镇", "今天"], found)
    assert only_common == {}  # in thousands of passages: nothing worth finding
    small = frequencies(10, 规则=4, 群里=6)
    assert set(term_weights(["规则", "群里"], small)) == {"规则", "群里"}  # a small folder


def test_words_the_folder_never_saw_lower_the_coverage() -> None:
    found = frequencies(1000, 天气=1)
    terms = ["今天", "天天", "天气", "气不", "不错"]
    weights = term_weights(terms, found)
    # A passage holding only 天气 matches a fifth of the question, not all of it.
    assert weights["天气"] / query_weight(terms, weights, found) < 0.5


def test_upload_names_and_groups() -> None:
    root = Path("/kb")
    assert upload_target(root, "rules.md", "") == root / "rules.md"
    assert upload_target(root, "rules.md", "123") == root / "123" / "rules.md"
    for name, group in (("../x.md", ""), (".hidden.md", ""), ("a/b.md", ""), ("x.exe", ""),
                        ("x.md", "123\n"), ("x.md", "１２３"), ("x.md", "abc")):  # fmt: skip
        with pytest.raises(HTTPException):
            upload_target(root, name, group)
