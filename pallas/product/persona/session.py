"""Sessions of a chat (pure): after a long quiet a new session begins with a freshly rolled
tone; in a private chat its first turn gets one "long time no see" hint, once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

QUIET = timedelta(hours=6)
TONES = ("懒洋洋的", "比较有精神", "有点话痨", "安静一些", "爱开玩笑", "温和耐心")


@dataclass(frozen=True)
class Session:
    started_at: datetime
    tone: str
    resumption: str  # the hint still to give ("" once given, or in a group)


def refreshed(
    current: Session | None,
    last_seen: datetime | None,
    now: datetime,
    private: bool,
    rng: random.Random,
) -> Session | None:
    """A new session when the chat was quiet longer than QUIET (or never had one); None
    when the current one goes on."""
    quiet = last_seen is None or now - last_seen > QUIET
    if current is not None and not quiet:
        return None
    hint = ""
    if private and last_seen is not None and now - last_seen > QUIET:
        hint = f"你们上次聊天是{_ago(now - last_seen)}前，可以自然地接上"
    return Session(now, rng.choice(TONES), hint)


def _ago(gap: timedelta) -> str:
    days = gap.days
    if days >= 1:
        return f"{days}天"
    return f"{gap.seconds // 3600}小时"
