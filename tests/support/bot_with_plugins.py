"""`bot.py` with extra plugins loaded besides the bot's own, named in PALLAS_E2E_PLUGINS
(comma-separated module names), as an owner's third-party plugins would be."""

from __future__ import annotations

import os

from bot import main

if __name__ == "__main__":
    main(
        extra_plugins=[name for name in os.environ.get("PALLAS_E2E_PLUGINS", "").split(",") if name]
    )
