"""The observation queue's filter: which new lines might hold something worth remembering.

Pure and cheap, so a run with nothing promising ends without a model call. It lets through
what people say about themselves ("我是…", "我不吃辣"), what a group agrees on ("我们群…",
"以后…"), and what they tell the bot about its manners ("你话太多了", "回复短一点"); the model
then decides, and by default remembers nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from pallas.store.conversation import WindowLine

MIN_CHARS = 4
MAX_CHARS = 300  # longer lines are pastes, not self-descriptions

_SELF = re.compile(
    r"(我|俺|本人|咱|人家)(们)?(的)?(是|不是|叫|喜欢|不喜欢|爱|讨厌|怕|不吃|不喝|吃|在|住|来自|老家|养|有|没有"
    r"|会|不会|属|生日|今年|工作|上班|上学|读|专业|学|毕业|用|玩|对.{0,6}过敏|一般|平时|每天|每周|其实)"
)
_GROUP = re.compile(r"(我们群|本群|咱们群|群里|群规|大家以后|以后大家)")
_TEACH = re.compile(
    r"(记住|记得|别忘了|以后(别|不要|少|多|要)|你(的)?(话|回复|回答|说话|消息)(太|有点|能不能|可以)"
    r"|(回复|说话|回答)(短|长|简单)一点|别(每次|老是|总是)|叫我|称呼我)"
)
_COMMAND = re.compile(r"^\s*[/!！#]")


def is_candidate(text: str) -> bool:
    normal = unicodedata.normalize("NFKC", text).strip()
    if not MIN_CHARS <= len(normal) <= MAX_CHARS or _COMMAND.match(normal):
        return False
    return bool(_SELF.search(normal) or _GROUP.search(normal) or _TEACH.search(normal))


def pick_candidates(lines: Sequence[WindowLine], after_id: int, limit: int) -> list[WindowLine]:
    """The newest `limit` lines after the cursor that people (not the bot) wrote and that
    pass the filter, oldest first."""
    fresh = [
        line
        for line in lines
        if line.message_id > after_id
        and not line.from_bot
        and not line.recalled
        and not line.suppressed
        and not line.is_poke
        and is_candidate(line.text)
    ]
    return fresh[-limit:] if limit > 0 else []
