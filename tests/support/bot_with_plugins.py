"""`bot.py` with extra plugins loaded besides the bot's own, named in PALLAS_E2E_PLUGINS
(comma-separated module names), as an owner's third-party plugins would be."""

from __future__ import annotations

import os

import nonebot

from bot import init_bot
from pallas.config import load_settings

if __name__ == "__main__":
    extra = [name for name in os.environ.get("PALLAS_E2E_PLUGINS", "").split(",") if name]
    init_bot(load_settings(), extra_plugins=extra)
    nonebot.run()
