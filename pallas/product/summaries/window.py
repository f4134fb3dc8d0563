"""Which lines a summary reads, and how they are shown to the model (pure).

A window is the last N hours, the last N lines, or everything after one message (a
latecomer's own last line). However it is asked for, it reads at most `MAX_LINES` of the
newest lines, and each line at most `LINE_CHARS` characters: a group with 100k lines today
costs what 1,500 lines cost, and says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pallas.core.actions import Origin
from pallas.core.local_time import SHANGHAI
from pallas.providers.estimate import estimate_tokens
from pallas.store.conversation import WindowLine

MAX_LINES = 1500
LINE_CHARS = 200
DEFAULT_HOURS = 24.0
DEFAULT_LINES = 200  # `/总结` alone: the last 200 lines of the last day
MAX_HOURS = 72.0
CHUNK_TOKENS = 6000  # one call reads this much; a longer window is read in chunks, merged
MAX_CHUNKS = 6

_HOURS = re.compile(r"([0-9]{1,3}(?:\.[0-9])?)\s*(?:个)?\s*(小时|h|钟头)", re.IGNORECASE)
_MINUTES = re.compile(r"([0-9]{1,4})\s*(?:分钟|min)", re.IGNORECASE)
_LINES = re.compile(r"([0-9]{1,5})\s*(?:条|句|行)")
USAGE = "用法：/总结（最近 200 条）、/总结 3小时、/总结 200条"


@dataclass(frozen=True)
class Window:
    hours: float = DEFAULT_HOURS  # lines no older than this
    lines: int = DEFAULT_LINES  # and at most this many of the newest
    after_message: int = 0  # and only after this message id (a latecomer's last line)

    def since(self, now: datetime) -> datetime:
        return now - timedelta(hours=self.hours)


def read_window(args: str) -> Window | str:
    """`/总结`'s words: nothing, `3小时`, `30分钟` or `200条`; a usage line otherwise."""
    words = args.strip()
    if not words:
        return Window()
    if match := _HOURS.fullmatch(words):
        hours = float(match[1])
        return Window(hours=hours, lines=MAX_LINES) if 0 < hours <= MAX_HOURS else USAGE
    if match := _MINUTES.fullmatch(words):
        minutes = int(match[1])
        fits = 0 < minutes <= MAX_HOURS * 60
        return Window(hours=minutes / 60, lines=MAX_LINES) if fits else USAGE
    if match := _LINES.fullmatch(words):
        count = int(match[1])
        return Window(hours=MAX_HOURS, lines=min(count, MAX_LINES)) if count > 0 else USAGE
    return USAGE


def window_words(window: Window) -> str:
    if window.after_message:
        return "你上次说话之后"
    if window.lines < MAX_LINES:
        return f"最近 {window.lines} 条"
    if window.hours < 1:
        return f"最近 {round(window.hours * 60)} 分钟"
    return f"最近 {window.hours:g} 小时"


def worth_reading(lines: Sequence[WindowLine]) -> list[WindowLine]:
    """What a summary reads: said lines; not recalled ones, silenced people's, commands'
    answers, or the bot's own reminders and summaries (a summary of summaries is noise)."""
    return [line for line in lines if line.text.strip() and not line.recalled
            and not line.suppressed and not line.is_poke
            and line.origin not in (Origin.TASK, Origin.COMMAND)]  # fmt: skip


def speaker_names(lines: Sequence[WindowLine], bot_name: str) -> dict[str, str]:
    """One name per speaker; two people with one name are told apart by their number's end."""
    first: dict[str, str] = {}
    for line in lines:
        first.setdefault(line.user_id, bot_name if line.from_bot else line.speaker)
    counts: dict[str, int] = {}
    for name in first.values():
        counts[name] = counts.get(name, 0) + 1
    named = {}
    for user_id, name in first.items():
        if not name:
            named[user_id] = f"用户{user_id[-4:]}"
        elif counts[name] > 1:
            named[user_id] = f"{name}（尾号{user_id[-4:]}）"
        else:
            named[user_id] = name
    return named


def render(lines: Sequence[WindowLine], names: dict[str, str]) -> list[str]:
    """`HH:MM 名字：话`, one per line, each cut to LINE_CHARS."""
    shown = []
    for line in lines:
        at = line.time.astimezone(SHANGHAI).strftime("%H:%M")
        text = " ".join(line.text.split())
        if len(text) > LINE_CHARS:
            text = text[:LINE_CHARS] + "…"
        shown.append(f"{at} {names[line.user_id]}：{text}")
    return shown


def chunks(rendered: Sequence[str], budget: int = CHUNK_TOKENS) -> list[list[str]]:
    """Consecutive runs of lines of at most `budget` tokens each, at most MAX_CHUNKS of
    them, the newest kept when there are more."""
    runs: list[list[str]] = []
    size = 0
    for text in reversed(rendered):
        cost = estimate_tokens(text) + 1
        if not runs or size + cost > budget:
            if len(runs) == MAX_CHUNKS:
                break
            runs.append([])
            size = 0
        runs[-1].append(text)
        size += cost
    return [list(reversed(run)) for run in reversed(runs)]
