"""End to end in a real browser (headless Chromium, Debian's package, driven by Playwright):
an owner signs in, changes a group's gate knob and sees the next turn use it, opens the
trace of a silence, and every page renders at phone and desktop width with chat text and
nicknames inert. With PALLAS_SCREENSHOTS set to a folder, each page is saved there at both
widths (docs/images/ holds the ones the docs show)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, async_playwright

from tests.support.bot_process import BotProcess
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec, silent_wav
from tests.support.fake_napcat import FakeNapCat, at, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.model_bot import bot_with_model
from tests.support.pictures import picture
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID = 46_701
GROUP, MEMBER, PRANKSTER = 8401, 9601, 9602
CHAT = "e2e-browser"
TOKEN = "browser-console-token"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# The flags a closed network needs: no background connections, no first-run, no sandbox (root).
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PHONE, DESKTOP = {"width": 390, "height": 844}, {"width": 1280, "height": 860}
XSS = '<img src=x onerror="window.__xss=1">'


def call(name: str, **arguments: object) -> Reply:
    return Reply("", (ToolCallSpec(name, json.dumps(arguments, ensure_ascii=False)),))


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(default=call("reply", text="在呢")) as server:
        yield server


@pytest.fixture(scope="module")
async def bot(
    tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer
) -> AsyncIterator[BotProcess]:
    env = {"PALLAS_CONSOLE_TOKEN": TOKEN, "NICKNAME": '["牛牛"]'}
    async with bot_with_model(tmp_path_factory.mktemp("browser"), model, CHAT, env=env) as bot:
        yield bot


@pytest.fixture(scope="module")
async def napcat(bot: BotProcess) -> AsyncIterator[FakeNapCat]:
    client = FakeNapCat(bot.ws_url, SELF_ID, ACCESS_TOKEN)
    client.answer_sends()
    await client.connect()
    yield client
    await client.close()


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        await launched.close()


@pytest.fixture(scope="module")
async def page(browser: Browser, bot: BotProcess) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport=DESKTOP, base_url=bot.http_url)
    opened = await context.new_page()
    opened.on("console", lambda message: _note_refusal(message.text))
    yield opened
    await context.close()


# What the browser refused under the pages' Content-Security-Policy (an inline style or
# script left in a template would show here).
csp_refusals: list[str] = []


def _note_refusal(text: str) -> None:
    if "Content Security Policy" in text:
        csp_refusals.append(text)


def stream_id(timeline: TimelineDb) -> int:
    return int(timeline.scalar("SELECT id FROM stream WHERE external_id = ?", str(GROUP)))


async def said(napcat: FakeNapCat, timeline: TimelineDb, user: int, words: str,
               nickname: str = "阿明") -> dict[str, Any]:  # fmt: skip
    event = napcat.group_message(GROUP, user, [text(words)], nickname=nickname)
    await napcat.send_event(event)
    await wait_for(lambda: timeline.messages(event["message_id"]), timeout=10, what="stored")
    return event


async def put_gate(bot: BotProcess, sid: int, changes: dict[str, Any]) -> None:
    """Change the group's gate knobs through the console's API."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=bot.http_url, headers=headers) as http:
        changed = await http.put(f"/pallas/api/settings/gate/{sid}", json=changes)
    assert changed.status_code == 200, changed.text


def our_id(timeline: TimelineDb, event: dict[str, Any]) -> int:
    return int(
        timeline.scalar(
            "SELECT id FROM message WHERE platform_message_id = ?", str(event["message_id"])
        )
    )


def decided(timeline: TimelineDb, message_id: int) -> bool:
    return bool(
        timeline.scalar(
            "SELECT COUNT(*) FROM event WHERE message_id = ? AND kind IN "
            "('gate_dropped', 'turn_finished', 'agent_decided')",
            message_id,
        )
    )


async def test_an_owner_signs_in(page: Page, napcat: FakeNapCat, bot: BotProcess) -> None:
    await page.goto("/pallas/overview")
    assert page.url.endswith("/pallas/login")  # not signed in yet
    if folder := os.environ.get("PALLAS_SCREENSHOTS", ""):
        for width_name, size in (("phone", PHONE), ("desktop", DESKTOP)):
            await page.set_viewport_size(size)
            await page.screenshot(path=str(Path(folder) / f"console-login-{width_name}.png"))
        await page.set_viewport_size(DESKTOP)
    await page.fill("#token", "wrong")
    await page.click("#login")
    assert "令牌不对" in await page.inner_text("#login-error")
    await page.fill("#token", TOKEN)
    await page.click("#login")
    await page.wait_for_url("**/pallas/overview")
    assert "总览" in await page.inner_text("h1")


async def test_a_gate_knob_changed_in_the_form_is_used_by_the_next_turn(
    page: Page, napcat: FakeNapCat, bot: BotProcess, model: FakeModelServer
) -> None:
    timeline = TimelineDb(bot.db_path)
    await said(napcat, timeline, MEMBER, "大家早")
    sid = stream_id(timeline)
    await page.goto(f"/pallas/settings/gate/{sid}")
    # A bad field (the browser's own checks pass it): refused, named, nothing half-saved.
    await page.fill("#ambient_probability", "1")
    await page.fill("#quiet_hours", "25:00-26:00")
    await page.click("#save")
    problems = await page.inner_text("#problems")
    assert "睡觉时段" in problems and "HH:MM-HH:MM" in problems
    assert timeline.scalar("SELECT COUNT(*) FROM stream_policy WHERE stream_id = ?", sid) == 0
    await page.fill("#quiet_hours", "")
    await page.fill("#ambient_cooldown_s", "0")
    await page.fill("#ambient_hourly_budget", "50")
    await page.click("#save")
    assert "已保存" in await page.inner_text("#saved")

    calls = len(model.requests_for(CHAT))
    event = await said(napcat, timeline, MEMBER, "今天吃什么好呢")  # nobody called the bot
    mid = our_id(timeline, event)
    await wait_for(lambda: len(model.requests_for(CHAT)) > calls, timeout=20, what="a turn")
    reason = timeline.scalar(
        "SELECT reason FROM event WHERE kind = 'gate_passed' AND message_id = ?", mid
    )
    assert reason == "ambient"


async def test_the_trace_of_a_silence_opens_from_the_chat_view(
    page: Page, napcat: FakeNapCat, bot: BotProcess, model: FakeModelServer
) -> None:
    timeline = TimelineDb(bot.db_path)
    model.script(CHAT, call("silent", reason="他们在聊私事，不插嘴"))
    event = await said(napcat, timeline, MEMBER, "牛牛你看这事怎么办")  # by name: deliberate
    mid = our_id(timeline, event)
    await wait_for(lambda: decided(timeline, mid), timeout=20, what="the decision")
    await wait_for(
        lambda: timeline.scalar(
            "SELECT COUNT(*) FROM event WHERE kind = 'turn_finished' AND reason = 'silent'"
        ),
        timeout=20,
        what="the silence",
    )
    await page.goto(f"/pallas/chats/{stream_id(timeline)}")
    await page.click(f"#m{mid} a.why")
    await page.wait_for_url(f"**/pallas/messages/{mid}")
    story = await page.inner_text("#story")
    assert story.startswith("看过了，没接：") and "他们在聊私事，不插嘴" in story
    assert "agent_decided" not in await page.inner_text("main")  # folded away
    decision = page.locator("ol.steps li", has_text="决定：不说话")
    await decision.locator("summary").click()
    assert "agent_decided" in await decision.inner_text()  # one click away, raw


CODE = re.compile(r"[A-Za-z_]{3,}")  # an English word or a snake_case code of the trail


async def visible_story(page: Page, path: str) -> tuple[str, str]:
    """The page's opening sentence, and everything shown without opening a detail."""
    response = await page.goto(path)
    assert response is not None and response.status == 200
    return await page.inner_text("#story"), await page.inner_text("main")


async def test_why_pages_open_with_a_sentence_and_fold_the_codes(
    page: Page, napcat: FakeNapCat, bot: BotProcess, model: FakeModelServer
) -> None:
    timeline = TimelineDb(bot.db_path)
    sid = stream_id(timeline)
    quiet = {"natural_window_s": 0, "ambient_probability": 0, "answer_public_questions": False}
    await put_gate(bot, sid, quiet)
    dropped = our_id(timeline, await said(napcat, timeline, MEMBER, "今天天气真好"))
    await wait_for(lambda: decided(timeline, dropped), timeout=20, what="the gate")
    model.script(CHAT, call("reply", text="在的在的"))
    event = napcat.group_message(GROUP, MEMBER, [at(SELF_ID), text("在吗")], nickname="阿明")
    await napcat.send_event(event)
    await wait_for(lambda: timeline.messages(event["message_id"]), timeout=10, what="stored")
    called = our_id(timeline, event)
    sent = "SELECT COUNT(*) FROM outbox o JOIN message m ON m.turn_id = o.turn_id " \
           "WHERE m.id = ? AND o.status = 'sent'"  # fmt: skip
    await wait_for(lambda: timeline.scalar(sent, called), timeout=20, what="the reply sent")
    usage = "SELECT COUNT(*) FROM llm_call c JOIN message m ON m.turn_id = c.turn_id WHERE m.id = ?"
    await wait_for(lambda: timeline.scalar(usage, called), timeout=10, what="its usage row")

    story, shown = await visible_story(page, f"/pallas/messages/{dropped}")
    assert story == "没理：这句话没有叫我，群里也没在跟我说话。"
    assert not CODE.findall(shown) and "{" not in shown, CODE.findall(shown)
    story, shown = await visible_story(page, f"/pallas/messages/{called}")
    assert story.startswith("回了：被 @ 了；用了 1 次模型，未设价格；"), story
    assert not CODE.findall(shown) and "{" not in shown, CODE.findall(shown)
    turn = timeline.scalar("SELECT turn_id FROM message WHERE id = ?", called)
    story, shown = await visible_story(page, f"/pallas/turns/{turn}")
    assert story.startswith("回了：用了 1 次模型") and not CODE.findall(shown)
    await put_gate(bot, sid, {"natural_window_s": 90, "ambient_probability": 0.02,
                              "answer_public_questions": True})  # fmt: skip

    # From outside, without a browser: the same page's HTML outside its folded details.
    cookies = {cookie["name"]: cookie["value"] for cookie in await page.context.cookies()}
    async with httpx.AsyncClient(base_url=bot.http_url, cookies=cookies) as http:
        html = (await http.get(f"/pallas/messages/{dropped}")).text
    outside = re.sub(r"<details>.*?</details>", "", html, flags=re.S)
    words = re.sub(r"<[^>]+>", " ", outside.split("<main>", 1)[1])
    assert "没理：" in words and not CODE.findall(words) and "{" not in words


async def test_pages_render_at_phone_and_desktop_width_with_text_inert(
    page: Page, napcat: FakeNapCat, bot: BotProcess
) -> None:
    timeline = TimelineDb(bot.db_path)
    event = await said(
        napcat, timeline, PRANKSTER, f"看看这个{XSS}", nickname=f"<script>x</script>{XSS}"
    )
    sid = stream_id(timeline)
    turn = timeline.scalar("SELECT MAX(turn_id) FROM event WHERE kind = 'turn_finished'")
    person = timeline.scalar(
        "SELECT person_id FROM identity WHERE user_id = ?", str(PRANKSTER)
    )
    paths = {
        "overview": "/pallas/overview",
        "chats": "/pallas/chats",
        "chat": f"/pallas/chats/{sid}",
        "explain": f"/pallas/messages/{our_id(timeline, event)}",
        "trace": f"/pallas/turns/{turn}",
        "persons": "/pallas/persons",
        "person": f"/pallas/persons/{person}",
        "settings": "/pallas/settings",
        "gate": f"/pallas/settings/gate/{sid}",
        "character": f"/pallas/settings/character/{SELF_ID}",
        "features": f"/pallas/settings/features/{sid}",
        "model-choice": "/pallas/settings/models/global",
        "delivery": "/pallas/settings/delivery/global",
        "rage": "/pallas/settings/rage/global",
        "jobs": "/pallas/jobs",
        "models": "/pallas/models",
        "tools": "/pallas/tools",
        "sandbox": "/pallas/sandbox",
        "stickers": "/pallas/pages/stickers",
        "behaviors": "/pallas/pages/behaviors",
    }
    folder = os.environ.get("PALLAS_SCREENSHOTS", "")
    for name, path in paths.items():
        for width_name, size in (("phone", PHONE), ("desktop", DESKTOP)):
            await page.set_viewport_size(size)
            response = await page.goto(path)
            assert response is not None and response.status == 200, (name, response)
            assert "script-src 'self'" in response.headers["content-security-policy"]
            assert response.headers["x-frame-options"] == "DENY"
            assert await page.evaluate("window.__xss") is None
            background = "getComputedStyle(document.body).backgroundColor"
            assert await page.evaluate(background) == "rgb(250, 250, 250)"  # the stylesheet
            scroll = await page.evaluate("document.documentElement.scrollWidth")
            assert scroll <= size["width"] + 1, (name, width_name, scroll)  # no sideways scroll
            if folder:
                target = Path(folder) / f"console-{name}-{width_name}.png"
                await page.screenshot(path=str(target), full_page=True)
    await page.goto(f"/pallas/chats/{sid}")
    assert XSS in await page.inner_text("main")  # shown as the text it is
    assert csp_refusals == []


async def test_a_sandbox_conversation_gets_the_models_reply_through_the_real_path(
    page: Page, bot: BotProcess, model: FakeModelServer
) -> None:
    timeline = TimelineDb(bot.db_path)
    await page.set_viewport_size(DESKTOP)
    await page.goto("/pallas/sandbox?chat=试聊")
    model.script(CHAT, call("reply", text="你好呀\n我是牛牛"))
    await page.fill("#text", "你好，你是谁")
    await page.check("#at")
    await page.click("#send")
    await page.locator(".line.bot", has_text="我是牛牛").wait_for(timeout=20_000)
    assert await page.locator(".line.bot", has_text="你好呀").count() == 1  # two bubbles
    if folder := os.environ.get("PALLAS_SCREENSHOTS", ""):
        for width_name, size in (("phone", PHONE), ("desktop", DESKTOP)):
            await page.set_viewport_size(size)
            target = Path(folder) / f"console-sandbox-talk-{width_name}.png"
            await page.screenshot(path=str(target), full_page=True)
    rows = timeline.query(
        "SELECT s.platform, m.text, m.from_bot FROM message m JOIN stream s "
        "ON s.id = m.stream_id WHERE s.external_id = '试聊' ORDER BY m.id"
    )
    assert {row["platform"] for row in rows} == {"sandbox"}  # stored like any chat, marked
    assert [row["text"] for row in rows if row["from_bot"]] == ["你好呀", "我是牛牛"]
    prompt = json.dumps(model.requests_for(CHAT)[-1].body["messages"], ensure_ascii=False)
    assert "你好，你是谁" in prompt

    status = """async (size) => (await fetch("/pallas/sandbox/试聊/say", {method: "POST",
      headers: {"Content-Type": "application/json",
                "X-CSRF-Token": document.getElementById("say").dataset.csrf},
      body: JSON.stringify({member: "sandbox-1", name: "小明",
                            text: "啊".repeat(size)})})).status"""
    assert await page.evaluate(status, 1_000_000) == 413  # a megabyte: refused, clearly
    assert await page.evaluate(status, 3_000) == 422  # over the 2,000 characters a line may have
    no_csrf = """async () => (await fetch("/pallas/sandbox/试聊/say", {method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({member: "sandbox-1", name: "小明", text: "hi"})})).status"""
    assert await page.evaluate(no_csrf) == 403


async def test_pages_speak_the_owners_words(
    page: Page, napcat: FakeNapCat, bot: BotProcess
) -> None:
    timeline = TimelineDb(bot.db_path)
    asked = our_id(timeline, await said(napcat, timeline, MEMBER, "/帮助"))
    await wait_for(lambda: decided_or_handled(timeline, asked), timeout=10, what="handled")
    sid = stream_id(timeline)
    await page.set_viewport_size(DESKTOP)

    await page.goto(f"/pallas/chats/{sid}")  # an answered command is not "why not"
    assert await page.inner_text(f"#m{asked} a.why") == "这条怎么处理的"
    assert await page.locator("#earlier").count() == 0  # nothing earlier to page to
    await page.goto("/pallas/sandbox?chat=周末群")
    await page.fill("#text", "大家好")
    await page.click("#send")
    await page.locator("#lines .line", has_text="大家好").wait_for()
    await page.goto("/pallas/chats")
    listed = await page.inner_text("main")
    assert "周末群\n沙盒里的试聊" in listed and "沙盒 周末群" not in listed

    await page.goto(f"/pallas/settings/gate/{sid}")
    assert await page.inner_text("#scope") == f"群 {GROUP}"  # never the row id alone
    await page.goto("/pallas/settings/agent/global")
    assert "这一轮要回的新消息从不舍掉" in await page.inner_text("main")

    await page.goto("/pallas/jobs")
    shown = await page.inner_text("main")
    assert not re.search(r"\b(pending|running|done|failed)\b", shown)
    await page.goto("/pallas/models")
    shown = await page.inner_text("main")
    assert "决定怎么回" in shown and "decision" not in shown
    assert "未设价格" in await page.inner_text("#week-cost")  # the test's model has no price

    await page.goto("/pallas/tools")
    shown = await page.inner_text("main")
    assert "chat__history" not in shown and "chat.history" in shown
    search = page.locator("tr", has_text="web.search")
    assert "开着，但用不了" in await search.inner_text()  # no TAVILY_API_KEY here


def decided_or_handled(timeline: TimelineDb, message_id: int) -> bool:
    return bool(
        timeline.scalar(
            "SELECT COUNT(*) FROM event WHERE message_id = ? AND kind = 'stage_handled'",
            message_id,
        )
    )


async def test_the_owner_adds_renames_and_removes_a_sticker_on_its_page(
    page: Page, bot: BotProcess, tmp_path: Path
) -> None:
    timeline = TimelineDb(bot.db_path)
    await page.set_viewport_size(DESKTOP)
    await page.goto("/pallas/overview")
    await page.click("nav >> text=表情包")  # a feature's own page, in the menu
    await page.wait_for_url("**/pallas/pages/stickers")
    drawn = tmp_path / "happy.png"
    drawn.write_bytes(picture("orange", (24, 24)))
    await page.set_input_files("#file", str(drawn))
    await page.fill("#new-caption", "开心")
    await page.click("#upload")
    await page.locator("#said", has_text="加进去了").wait_for()
    sha = str(timeline.scalar("SELECT sha256 FROM sticker WHERE caption = '开心'"))
    short = sha[:12]
    shown = page.locator(f"#caption-{short}")
    await shown.wait_for()
    loaded = "el => el.complete && el.naturalWidth > 0"
    assert await page.locator("img.sticker").first.evaluate(loaded)  # the picture itself
    await shown.fill("开心到转圈")
    await page.click(f"#rename-{short}")
    await page.locator("#said", has_text="改好了").wait_for()
    assert timeline.scalar("SELECT caption FROM sticker WHERE sha256 = ?", sha) == "开心到转圈"
    await page.click(f"#remove-{short}")
    await page.locator("#said", has_text="移除了").wait_for()
    await shown.wait_for(state="detached")
    assert timeline.scalar("SELECT enabled FROM sticker WHERE sha256 = ?", sha) == 0
    assert csp_refusals == []
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=bot.http_url, headers=headers) as http:
        refused = [
            await http.post("/pallas/api/stickers?caption=x", content=body)
            for body in (b"<svg onload=1>", silent_wav())  # a page, a sound: not a sticker
        ]
        blank = await http.post("/pallas/api/stickers?caption=%20", content=picture("red"))
        renamed = await http.put(f"/pallas/api/stickers/{'0' * 64}", json={"caption": "x"})
    assert [r.json()["detail"][:10] for r in refused] == ["这不是一张能用的图片"] * 2
    assert blank.status_code == 422 and renamed.status_code == 404
