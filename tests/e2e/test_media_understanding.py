"""End to end: pictures understood, the sticker habit, sticker replies and voice replies.

fake NapCat (real WebSocket) -> the real bot (its own process, a providers file with chat,
planner, vision, asr and tts models on the fake model server) -> a local HTTP server standing in
for QQ's file servers. One bot for the module; the steps build on each other in order: the
sticker the habit step learns is the one the "哈哈" step sends back.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.bot_process import REPO_ROOT, BotProcess
from tests.support.console_api import put_settings
from tests.support.fake_llm import SILENT_WAV, FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, at, image, text
from tests.support.fake_web import FakeWebServer, Page
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.pictures import picture
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID = 46_301
GROUP, MING = 7901, 8901
CHAT, VISION, ASR, TTS = "e2e-chat", "e2e-vision", "e2e-asr", "e2e-tts"
TOKEN = "media-console-token"
CAT = picture("orange", (16, 12))
DOG = picture("teal", (10, 10))
AGENT_FILE = """\
memory:
  extraction_delay_s: 600
media:
  habit_threshold: 3
  collect_threshold: 3
  sight_wait_s: 15
"""


def providers_file(base_url: str) -> str:
    models = "\n".join(
        f"      - {{name: {name}, model: {name}, types: [{kind}]}}"
        for name, kind in (
            (CHAT, "chat"),
            ("e2e-planner", "tool"),
            (VISION, "vision"),
            (ASR, "asr"),
            (TTS, "tts"),
        )
    )
    return f"providers:\n  - name: fake\n    base_url: {base_url}\n    api_key: sk-e2e\n" + (
        f"    models:\n{models}\n"
    )


def reply(words: str) -> Reply:
    return Reply("", (ToolCallSpec("reply", json.dumps({"text": words}, ensure_ascii=False)),))


def sticker(url: str) -> dict[str, Any]:
    segment = image("dog.gif", url)
    segment["data"].update({"sub_type": 1, "summary": "[动画表情]"})
    return segment


def record(url: str) -> dict[str, Any]:
    return {"type": "record", "data": {"file": "hello.wav", "url": url, "file_size": "420"}}


class NapCat(FakeNapCat):
    def __init__(self, ws_url: str) -> None:
        super().__init__(ws_url, SELF_ID, ACCESS_TOKEN)
        self.answer_sends()

    def sent(self, action: str) -> list[list[dict[str, Any]]]:
        return [params["message"] for params in self.calls_to(action)]


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[FakeModelServer]:
    # Unscripted turns (the gate may take up the stickers) stay silent.
    silent = Reply("", (ToolCallSpec("silent", '{"reason": "e2e"}'),))
    async with FakeModelServer(default=silent) as server:
        yield server


@pytest.fixture(scope="module")
async def files() -> AsyncIterator[FakeWebServer]:
    async with FakeWebServer() as server:
        server.routes["/cat.png"] = Page(CAT, content_type="image/png")
        server.routes["/dog.gif"] = Page(DOG, content_type="image/png")
        server.routes["/hello.wav"] = Page(SILENT_WAV, content_type="audio/wav")
        yield server


@pytest.fixture(scope="module")
async def bot(
    tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer
) -> AsyncIterator[BotProcess]:
    workdir = tmp_path_factory.mktemp("media")
    (workdir / "config").mkdir()
    (workdir / "config" / "agent.yml").write_text(AGENT_FILE, encoding="utf-8")
    providers = workdir / "providers.yml"
    providers.write_text(providers_file(model.base_url), encoding="utf-8")
    env = {
        "PALLAS_PROVIDERS_FILE": str(providers),
        "PALLAS_E2E_PLUGINS": "tests.support.habit_plugin",
        "PALLAS_E2E_HABIT_GO": str(workdir / "habit-go"),
        "PALLAS_CONSOLE_TOKEN": TOKEN,
    }
    script = REPO_ROOT / "tests" / "support" / "bot_with_plugins.py"
    process = BotProcess(workdir, token=ACCESS_TOKEN, env=env, script=script)
    process.start()
    await process.wait_ready()
    yield process
    process.stop()


@pytest.fixture(scope="module")
async def napcat(bot: BotProcess) -> AsyncIterator[NapCat]:
    client = NapCat(bot.ws_url)
    await client.connect()
    yield client
    await client.close()


@pytest.fixture(scope="module")
def timeline(bot: BotProcess) -> TimelineDb:
    return TimelineDb(bot.db_path)


def settled(timeline: TimelineDb, platform_ids: list[int]) -> bool:
    """Every message was gated, and every turn that started has ended: nothing left that
    could take a scripted answer meant for the next question."""
    ids = [timeline.messages(pid)[0]["id"] for pid in platform_ids]
    gated = timeline.query(
        "SELECT DISTINCT message_id FROM event WHERE kind IN ('gate_passed', 'gate_dropped')"
    )
    started = timeline.scalar("SELECT COUNT(*) FROM event WHERE kind = 'turn_started'")
    ended = timeline.scalar(
        "SELECT COUNT(*) FROM event WHERE kind IN "
        "('turn_finished', 'turn_failed', 'turn_waiting', 'turn_interrupted')"
    )
    return set(ids) <= {row["message_id"] for row in gated} and started == ended


def prompt_of(model: FakeModelServer, name: str) -> str:
    return json.dumps(model.requests_for(name)[-1].body["messages"], ensure_ascii=False)


async def test_a_picture_the_question_is_about_is_described_in_its_own_row(
    napcat: NapCat, model: FakeModelServer, timeline: TimelineDb, files: FakeWebServer
) -> None:
    model.script(VISION, Reply('{"description": "一只橘猫趴在键盘上", "emotions": []}'))
    model.script(CHAT, reply("好胖的猫"))
    question = napcat.group_message(
        GROUP, MING, [at(SELF_ID), text(" 看看这张图"), image("cat.png", files.url("/cat.png"))]
    )
    await napcat.send_event(question)
    await wait_for(lambda: napcat.sent("send_group_msg"), timeout=30, what="the answer")

    row = timeline.messages(question["message_id"])[0]
    assert row["text"].endswith("看看这张图[图片：一只橘猫趴在键盘上]")
    assert "一只橘猫趴在键盘上" in prompt_of(model, CHAT)  # the turn waited for it
    assert len(model.requests_for(VISION)) == 1
    labels = timeline.query("SELECT description FROM asset WHERE labelled_at IS NOT NULL")
    assert [r["description"] for r in labels] == ["一只橘猫趴在键盘上"]


async def test_a_favourite_sticker_becomes_a_fact_seen_in_a_later_prompt(
    bot: BotProcess,
    napcat: NapCat,
    model: FakeModelServer,
    timeline: TimelineDb,
    files: FakeWebServer,
) -> None:
    sent = []
    for minutes in (40, 35, 30):  # older than the scan's settling time
        event = napcat.group_message(GROUP, MING, [sticker(files.url("/dog.gif"))])
        await napcat.send_event({**event, "time": int(time.time()) - minutes * 60})
        sent.append(event["message_id"])

    def kept() -> bool:
        rows = [timeline.messages(mid) for mid in sent]
        return all(r and "asset:" in r[0]["segments"] for r in rows)

    await wait_for(kept, timeout=20, what="the three stickers kept")
    await wait_for(lambda: settled(timeline, sent), timeout=20, what="the stickers' turns over")
    model.script(VISION, Reply('{"description": "狗头笑", "emotions": ["哈哈", "得意"]}'))
    Path(bot.workdir / "habit-go").write_text("go", encoding="utf-8")

    def fact() -> list[Any]:
        return timeline.query(
            "SELECT text FROM memory_entry WHERE source = 'sticker_habit' AND status = 'active'"
        )

    facts = await wait_for(fact, timeout=30, what="the habit fact")
    assert [f["text"] for f in facts] == ["常用表情包：狗头笑"]
    collected = await wait_for(
        lambda: timeline.query("SELECT caption, emotions, source FROM sticker"),
        timeout=20,
        what="the sticker collected",
    )
    assert [(c["caption"], c["emotions"], c["source"]) for c in collected] == [
        ("狗头笑", "哈哈 得意", "group")
    ]

    before = len(napcat.sent("send_group_msg"))
    model.script(CHAT, reply("在呢"))
    await napcat.send_event(napcat.group_message(GROUP, MING, [at(SELF_ID), text(" 在吗")]))
    await wait_for(
        lambda: len(napcat.sent("send_group_msg")) > before, timeout=30, what="the answer"
    )
    assert "常用表情包：狗头笑" in prompt_of(model, CHAT)


async def test_a_short_laugh_gets_a_sticker_and_nothing_else(
    napcat: NapCat, model: FakeModelServer, timeline: TimelineDb
) -> None:
    before = len(napcat.sent("send_group_msg"))
    model.script(CHAT, reply("[表情:哈哈]"))
    await napcat.send_event(napcat.group_message(GROUP, MING, [at(SELF_ID), text(" 哈哈")]))
    await wait_for(
        lambda: len(napcat.sent("send_group_msg")) > before, timeout=30, what="the sticker"
    )
    message = napcat.sent("send_group_msg")[-1]
    assert [segment["type"] for segment in message] == ["image"]
    data = message[0]["data"]
    assert data["sub_type"] == 1 and data["summary"] == "[动画表情]"
    assert base64.b64decode(data["file"].removeprefix("base64://")) == DOG
    uses = await wait_for(
        lambda: timeline.query("SELECT uses FROM sticker WHERE uses > 0"),
        timeout=10,
        what="the use counted after the receipt",
    )
    assert [u["uses"] for u in uses] == [1]
    own = timeline.query("SELECT text FROM message WHERE from_bot = 1 ORDER BY id DESC LIMIT 1")
    assert own[0]["text"] == "[动画表情：狗头笑]"


async def test_a_voice_is_transcribed_and_answered_by_voice(
    napcat: NapCat, model: FakeModelServer, timeline: TimelineDb, files: FakeWebServer
) -> None:
    model.script(ASR, Reply("明天几点集合"))
    model.script(CHAT, reply("八点，别迟到"))
    voice = napcat.private_message(MING, [record(files.url("/hello.wav"))])
    await napcat.send_event(voice)
    await wait_for(lambda: napcat.sent("send_private_msg"), timeout=30, what="the voice answer")

    assert timeline.messages(voice["message_id"])[0]["text"] == "[语音：明天几点集合]"
    assert "明天几点集合" in prompt_of(model, CHAT)
    upload = model.requests_for(ASR)[-1]
    assert upload.files["file"] == SILENT_WAV
    assert model.requests_for(TTS)[-1].body["input"] == "八点，别迟到"
    message = napcat.sent("send_private_msg")[-1]
    assert [segment["type"] for segment in message] == ["record"]
    spoken = base64.b64decode(message[0]["data"]["file"].removeprefix("base64://"))
    assert spoken == SILENT_WAV
    spoken_row = "SELECT text FROM message WHERE from_bot = 1 AND text LIKE '[语音%'"
    own = await wait_for(lambda: timeline.query(spoken_row), timeout=10, what="the voice recorded")
    assert [row["text"] for row in own] == ["[语音：八点，别迟到]"]


async def test_voice_replies_switched_and_revoiced_in_the_console(
    napcat: NapCat, model: FakeModelServer, files: FakeWebServer, bot: BotProcess
) -> None:
    async def answer_to_a_voice(words: str) -> list[str]:
        before = len(napcat.sent("send_private_msg"))
        model.script(ASR, Reply("在吗"))
        model.script(CHAT, reply(words))
        await napcat.send_event(napcat.private_message(MING, [record(files.url("/hello.wav"))]))
        await wait_for(lambda: len(napcat.sent("send_private_msg")) > before, what="the answer")
        return [segment["type"] for segment in napcat.sent("send_private_msg")[-1]]

    spoken = len(model.requests_for(TTS))
    await put_settings(bot, TOKEN, "media", {"voice_replies": False})
    assert await answer_to_a_voice("在，打字回你") == ["text"]
    assert len(model.requests_for(TTS)) == spoken  # no speech asked for
    await put_settings(bot, TOKEN, "media", {"voice_replies": True, "tts_voice": "nova"})
    assert await answer_to_a_voice("在，这次说给你听") == ["record"]
    assert model.requests_for(TTS)[-1].body["voice"] == "nova"
