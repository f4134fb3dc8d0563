"""What counts as an attack on the bot (pure): insults and put-downs aimed at it.

Only words the sender typed to the bot count: a message in a private chat, or one that @s it,
calls it by name or replies to it. Text inside quotation marks is someone else's words being
repeated ("他说「你是傻逼」"), not an attack. An owner is never attacking; a close friend's
put-down ("你真笨") is a joke, and a close friend's insult weighs half. The word lists are the
memory guard's (pallas/product/memory/lexicon.py), so one list decides what is vulgar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from pallas.product.persona.favor import Tier
from pallas.product.teaching.guard import belittling_matches, find_vulgar, normalise

# Quoted spans: Chinese corner and curly quotes, and ASCII double quotes.
_QUOTED = re.compile(r"「[^」]*」|『[^』]*』|“[^”]*”|\"[^\"]*\"")


class AttackKind(StrEnum):
    INSULT = "insult"  # vulgar words
    PUT_DOWN = "put_down"  # belittling "you are ..." sentences
    JUDGED = "judged"  # the model said the batch attacked it ([冒犯:…]), no word list matched


# Rage added, favorability lost.
RAGE_WEIGHT = {AttackKind.INSULT: 4.0, AttackKind.PUT_DOWN: 2.0, AttackKind.JUDGED: 2.0}
FAVOR_LOSS = {AttackKind.INSULT: 8.0, AttackKind.PUT_DOWN: 3.0, AttackKind.JUDGED: 3.0}


@dataclass(frozen=True)
class Attack:
    kind: AttackKind
    rage: float
    favor_loss: float
    evidence: str  # which rule matched, for the audit trail


_YOU = re.compile(r"你|\byou\b|\bu\b")


def _says_you(text: str) -> bool:
    return _YOU.search(text) is not None


def unquoted(text: str) -> str:
    return _QUOTED.sub(" ", text)


def find_attack(words: str, *, at_bot: bool, owner: bool, tier: Tier) -> Attack | None:
    """The attack in `words` (what the sender typed), or None."""
    if owner or not at_bot:
        return None
    forms = normalise(unquoted(words))
    vulgar = find_vulgar(forms)
    if vulgar is not None:
        share = 0.5 if tier is Tier.CLOSE else 1.0
        kind = AttackKind.INSULT
        return Attack(kind, RAGE_WEIGHT[kind] * share, FAVOR_LOSS[kind] * share, vulgar)
    if tier is Tier.CLOSE:
        return None
    belittling = _put_down_of_you(unquoted(words))
    if belittling is None:
        return None
    kind = AttackKind.PUT_DOWN
    return Attack(kind, RAGE_WEIGHT[kind], FAVOR_LOSS[kind], belittling)


def _put_down_of_you(text: str) -> str | None:
    """A belittling phrase whose subject is "you": "你知道吗他真笨" is about someone else."""
    for match in belittling_matches(normalise(text)):
        if _says_you(match.group()):
            return f"word {match.group('word')!r} in {match.group()!r}"
    return None


def judged_attack(reason: str, *, owner: bool, tier: Tier) -> Attack | None:
    """The model's judgment that a turn's messages attacked it, as an attack by rule: never an
    owner's, never a close friend's (their rough words are jokes), weighed as a put-down."""
    if owner or tier is Tier.CLOSE:
        return None
    kind = AttackKind.JUDGED
    return Attack(kind, RAGE_WEIGHT[kind], FAVOR_LOSS[kind], f"model: {reason.strip()[:40]}")
