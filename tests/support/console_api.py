"""Changing a running bot's settings the way an owner's script does: the console API with
the bearer token (docs/console.md)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.bot_process import BotProcess


async def put_settings(
    bot: BotProcess, token: str, key: str, changes: dict[str, Any], scope: str = "global"
) -> dict[str, Any]:
    """Change one section for one scope; the section as the console now reads it."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=bot.http_url, headers=headers) as http:
        changed = await http.put(f"/pallas/api/settings/{key}/{scope}", json=changes)
    assert changed.status_code == 200, changed.text
    section: dict[str, Any] = changed.json()
    return section
