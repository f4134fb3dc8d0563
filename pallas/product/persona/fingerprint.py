"""The bot's expression fingerprint: the little habits of its replies that landed well.

  a reply of the bot -> the next few messages of others: a laugh, a "确实", a quote of it, and
     no attack -> it landed
  -> its habits: a sentence-final particle ("呗", "啦"), an opening interjection ("害", "啊这")
  -> the ones seen in at least MIN_USES landed replies, most used first, at most MAX_PHRASES

Pure, over plain text; the nightly job `persona.fingerprint` feeds it the bot's recent replies
and stores the result. Attacks never change it: a reply followed by an attack did not land.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pallas.product.teaching.guard import find_belittling, find_vulgar, normalise

MIN_USES = 2
MAX_PHRASES = 6
PARTICLES = ("呗", "啦", "嘛", "哈", "呀", "咯", "捏", "噢", "哦", "喔", "嘞", "哇", "吧", "了")
OPENERS = ("害", "嗐", "啊这", "好家伙", "emmm", "嗯哼", "哎呀", "哈哈", "笑死", "草")
CHEERS = ("哈哈", "hhh", "笑死", "草", "确实", "对对", "666", "好耶", "牛", "有道理", "绝了")
_END = " \t\n。！!？?~～…，,."


@dataclass(frozen=True)
class SentReply:
    text: str  # what the bot said
    answers: tuple[str, ...]  # the next few messages of others, in order
    quoted: bool = False  # one of them quoted it


def landed(reply: SentReply) -> bool:
    if any(_attacks(answer) for answer in reply.answers):
        return False
    return reply.quoted or any(cheer in a.lower() for a in reply.answers for cheer in CHEERS)


def habits(text: str) -> list[str]:
    """The particles that end its sentences and the interjection that opens it."""
    found = []
    opener = next((o for o in OPENERS if text.lstrip().lower().startswith(o)), None)
    if opener:
        found.append(opener)
    for sentence in text.replace("\n", "。").split("。"):
        bare = sentence.rstrip(_END)
        if bare and bare[-1] in PARTICLES and len(bare) > 1:
            found.append(bare[-1])
    return list(dict.fromkeys(found))


def fingerprint(replies: Sequence[SentReply]) -> list[str]:
    counts = Counter(habit for reply in replies if landed(reply) for habit in habits(reply.text))
    common = [(habit, n) for habit, n in counts.most_common() if n >= MIN_USES]
    return [habit for habit, _ in common[:MAX_PHRASES]]


def _attacks(text: str) -> bool:
    forms = normalise(text)
    return find_vulgar(forms) is not None or find_belittling(forms) is not None
