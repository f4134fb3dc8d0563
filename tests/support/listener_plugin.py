"""A third-party plugin for the end-to-end tests: it notes every group message its matcher
sees in the file named by PALLAS_E2E_LISTENER_LOG (a message the bot silenced must not
reach it)."""

from __future__ import annotations

import os
from pathlib import Path

from nonebot import on_message
from nonebot.adapters.onebot.v11 import GroupMessageEvent

LOG = Path(os.environ["PALLAS_E2E_LISTENER_LOG"])

listener = on_message(priority=1, block=False)


@listener.handle()
async def note(event: GroupMessageEvent) -> None:
    with LOG.open("a", encoding="utf-8") as log:
        log.write(f"{event.user_id} {event.get_plaintext()}\n")
