"""End to end in a real browser, as a new owner meets the console: a bot with no model and no
NapCat says what is missing and what to do first, the sandbox keeps a line's breaks, an empty
list says why it is empty, the chart has axes, and the owner can sign out."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Page, async_playwright

from tests.e2e.test_console_browser import CHROMIUM, DESKTOP, FLAGS, PHONE
from tests.support.bot_process import BotProcess, running
from tests.support.console_api import signed_in_page
from tests.support.fake_napcat import FakeNapCat, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import wait_for

TOKEN = "owner-console-token"


@pytest.fixture(scope="module")
async def bot(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BotProcess]:
    env = {"PALLAS_CONSOLE_TOKEN": TOKEN}
    workdir = tmp_path_factory.mktemp("owner")
    async with running(BotProcess(workdir, token=ACCESS_TOKEN, env=env)) as bot:
        yield bot


@pytest.fixture(scope="module")
async def page(bot: BotProcess) -> AsyncIterator[Page]:
    async with async_playwright() as playwright:
        browser: Browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield await signed_in_page(browser, bot, TOKEN)
        await browser.close()


async def test_the_overview_says_what_is_missing_and_what_to_do_first(page: Page) -> None:
    await page.goto("/pallas/overview")
    gaps = await page.inner_text("#gaps")
    assert "还没有设置聊天模型" in gaps and "LLM_MODEL" in gaps
    assert "NapCat 还没有连上" in gaps and "/onebot/v11/ws" in gaps
    guide = await page.inner_text("#guide")
    assert "连上 NapCat" in guide and "设置一个聊天模型" in guide and "在沙盒里试一句" in guide
    assert await page.inner_text("#cost b") == "未设价格"
    if folder := os.environ.get("PALLAS_SCREENSHOTS", ""):
        for width_name, size in (("phone", PHONE), ("desktop", DESKTOP)):
            await page.set_viewport_size(size)
            target = Path(folder) / f"console-first-run-{width_name}.png"
            await page.screenshot(path=str(target), full_page=True)
        await page.set_viewport_size(DESKTOP)


async def test_the_sandbox_says_an_at_goes_unanswered_without_a_model(page: Page) -> None:
    await page.goto("/pallas/sandbox?chat=空白")
    gaps = await page.inner_text("#gaps")
    assert "还没有设置聊天模型" in gaps and "NapCat" not in gaps  # the sandbox needs none


async def test_an_empty_list_says_why_it_is_empty(page: Page) -> None:
    await page.goto("/pallas/persons")
    assert "还没有认识的人" in await page.inner_text("#none")
    await page.goto("/pallas/persons?q=nobody")
    assert "没找到叫「nobody」的人" in await page.inner_text("#none")


async def test_the_sandbox_keeps_a_lines_breaks(page: Page) -> None:
    await page.goto("/pallas/sandbox?chat=换行")
    await page.click("#text")
    await page.keyboard.type("第一行")
    await page.keyboard.press("Shift+Enter")
    await page.keyboard.type("第二行")
    await page.keyboard.press("Enter")  # sends
    line = page.locator("#lines .line .text", has_text="第二行")
    await line.wait_for(timeout=10_000)
    assert await line.inner_text() == "第一行\n第二行"
    await page.reload()  # as stored, shown again with its break
    assert await page.locator("#lines .line .text").last.inner_text() == "第一行\n第二行"


async def test_the_chart_has_axes_and_units(page: Page) -> None:
    await page.goto("/pallas/overview")
    chart = page.locator("svg#hours")
    labels = await chart.locator("text").all_text_contents()
    assert "0" in labels and "条/时" in labels
    assert sum(bool(re.fullmatch(r"\d\d:00", label)) for label in labels) == 4
    assert "纵轴" in await page.inner_text("main")


async def test_the_console_has_an_icon(page: Page, bot: BotProcess) -> None:
    await page.goto("/pallas/overview")
    href = await page.get_attribute("link[rel=icon]", "href")
    async with httpx.AsyncClient(base_url=bot.http_url) as http:
        icon = await http.get(str(href))
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"


async def test_status_in_the_chat_says_no_model_is_set_in_plain_words(bot: BotProcess) -> None:
    napcat = FakeNapCat(bot.ws_url, 46_801, ACCESS_TOKEN)
    napcat.answer_sends()
    await napcat.connect()
    try:
        event = napcat.group_message(8601, 9801, [text("/状态")])
        await napcat.send_event(event)
        await wait_for(lambda: napcat.calls_to("send_group_msg"), timeout=10, what="the answer")
    finally:
        await napcat.close()
    [sent] = napcat.calls_to("send_group_msg")
    answer = "".join(segment["data"].get("text", "") for segment in sent["message"])
    assert "开着：模型聊天" in answer and "还没有设置聊天模型" in answer
    assert not re.search(r"[a-z]{3,}_[a-z_]+|\b(done|silent|command)\b", answer)


async def test_an_owner_signs_out(page: Page) -> None:
    await page.goto("/pallas/overview")
    await page.click("#logout")
    await page.wait_for_url("**/pallas/login")
    await page.goto("/pallas/overview")
    assert page.url.endswith("/pallas/login")  # the session is gone
