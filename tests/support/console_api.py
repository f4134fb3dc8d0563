"""The console as an owner uses it: the API with the bearer token (an owner's script), and a
browser signed in through the login form (docs/console.md)."""

from __future__ import annotations

from typing import Any

import httpx
from playwright.async_api import Browser, Page

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


async def signed_in_page(browser: Browser, bot: BotProcess, token: str) -> Page:
    """A new page of `browser`, signed in to the bot's console through its login form."""
    page = await (await browser.new_context(base_url=bot.http_url)).new_page()
    await page.goto("/pallas/login")
    await page.fill("#token", token)
    await page.click("#login")
    await page.wait_for_url("**/pallas/overview")
    return page
