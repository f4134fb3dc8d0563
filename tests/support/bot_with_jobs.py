"""`bot.py` with the end-to-end job plugin loaded besides the bot's own plugins."""

from __future__ import annotations

import nonebot

from bot import init_bot
from pallas.config import load_settings

if __name__ == "__main__":
    init_bot(load_settings(), extra_plugins=("tests.support.job_plugin",))
    nonebot.run()
