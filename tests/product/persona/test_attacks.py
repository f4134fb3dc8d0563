"""What counts as an attack on the bot (pure): insults and put-downs aimed at it, and every
look-alike that is not one (someone else's words quoted, talk about a third person, an owner,
a close friend's joke, plain friendly words)."""

from __future__ import annotations

import pytest

from pallas.product.persona.attacks import (
    FAVOR_LOSS,
    RAGE_WEIGHT,
    Attack,
    AttackKind,
    find_attack,
    unquoted,
)
from pallas.product.persona.favor import Tier


def attack(
    words: str, *, at_bot: bool = True, owner: bool = False, tier: Tier = Tier.NEUTRAL
) -> Attack | None:
    return find_attack(words, at_bot=at_bot, owner=owner, tier=tier)


def test_the_weights() -> None:
    assert RAGE_WEIGHT == {AttackKind.INSULT: 4.0, AttackKind.PUT_DOWN: 2.0, AttackKind.JUDGED: 2.0}
    assert FAVOR_LOSS == {AttackKind.INSULT: 8.0, AttackKind.PUT_DOWN: 3.0, AttackKind.JUDGED: 3.0}


@pytest.mark.parametrize("words", ["你是傻逼", "傻逼", "你 是 傻 逼", "你是SB", "你才是傻逼吧"])
def test_an_insult_at_the_bot_is_an_insult(words: str) -> None:
    found = attack(words)
    assert isinstance(found, Attack)
    assert (found.kind, found.rage, found.favor_loss) == (AttackKind.INSULT, 4.0, 8.0)
    assert found.evidence  # the matched rule, for the audit trail


@pytest.mark.parametrize("words", ["你真笨", "你是个笨蛋", "你是猪"])
def test_a_put_down_at_the_bot_is_a_put_down(words: str) -> None:
    found = attack(words)
    assert found is not None
    assert (found.kind, found.rage, found.favor_loss) == (AttackKind.PUT_DOWN, 2.0, 3.0)


@pytest.mark.parametrize("words", ["你是傻逼", "你真笨"])
def test_the_same_words_not_aimed_at_the_bot_are_nothing(words: str) -> None:
    assert attack(words, at_bot=False) is None


@pytest.mark.parametrize("words", ["你是傻逼", "你真笨"])
def test_an_owner_never_attacks(words: str) -> None:
    assert attack(words, owner=True) is None
    assert attack(words, owner=True, tier=Tier.HOSTILE) is None


@pytest.mark.parametrize(
    "words",
    [
        "他说「你是傻逼」",
        "“你是傻逼”",
        "他说：『你是傻逼』",
        '他说"你是sb"',
        "他说“你是傻逼”我不同意",
        "「你真笨」是他说的",
    ],
)
def test_quoted_words_are_someone_else_s(words: str) -> None:
    assert attack(words) is None


def test_only_the_quoted_span_is_left_out() -> None:
    assert unquoted("他说「你是傻逼」") == "他说 "
    found = attack("他说「你好」，你是傻逼")
    assert found is not None and found.kind is AttackKind.INSULT


def test_a_close_friend_s_put_down_is_a_joke() -> None:
    assert attack("你真笨", tier=Tier.CLOSE) is None
    # One tier lower, the same words are a put-down.
    assert attack("你真笨", tier=Tier.FAMILIAR) is not None


def test_a_close_friend_s_insult_weighs_half() -> None:
    found = attack("你是傻逼", tier=Tier.CLOSE)
    assert found is not None
    assert (found.kind, found.rage, found.favor_loss) == (AttackKind.INSULT, 2.0, 4.0)


@pytest.mark.parametrize("tier", [Tier.HOSTILE, Tier.COLD, Tier.NEUTRAL, Tier.FAMILIAR])
def test_other_tiers_weigh_in_full(tier: Tier) -> None:
    found = attack("你是傻逼", tier=tier)
    assert found is not None and (found.rage, found.favor_loss) == (4.0, 8.0)


@pytest.mark.parametrize("words", ["他是猪", "他真笨", "她是个笨蛋"])
def test_a_put_down_of_someone_else_is_no_attack_on_the_bot(words: str) -> None:
    assert attack(words) is None


@pytest.mark.parametrize("words", ["你看，他是猪", "你知道吗他真笨"])
def test_a_put_down_of_someone_else_told_to_the_bot_is_no_attack(words: str) -> None:
    """Talking to the bot ("你看，...") about a third person does not make it "you are ..."."""
    assert attack(words) is None


@pytest.mark.parametrize(
    "words", ["你好呀", "我是你的粉丝", "你真好", "你真聪明", "谢谢你", "", "   "]
)
def test_harmless_words_are_nothing(words: str) -> None:
    assert attack(words) is None
