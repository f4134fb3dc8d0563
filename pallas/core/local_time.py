"""The bot's local time: its day, its reports' dates and "today" are China's (UTC+8), whatever
the machine's zone (pure)."""

from __future__ import annotations

from zoneinfo import ZoneInfo

SHANGHAI = ZoneInfo("Asia/Shanghai")
