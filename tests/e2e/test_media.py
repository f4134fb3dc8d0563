"""End to end: pictures people send are kept once by content, off the ingress path.

fake NapCat (real WebSocket) -> the real bot -> media stage -> job `media.fetch` -> a local HTTP
server standing in for QQ's picture CDN -> the asset store (a file and a row) -> the message's
segments carry the `asset:` reference.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.bot_process import BotProcess
from tests.support.fake_napcat import FakeNapCat, image, text
from tests.support.fake_web import FakeWebServer, Page
from tests.support.pictures import picture
from tests.support.timeline_db import TimelineDb, wait_for


@pytest.fixture
async def cdn() -> AsyncIterator[FakeWebServer]:
    async with FakeWebServer() as server:
        server.routes["/one.png"] = Page(picture("orange", (12, 9)), content_type="image/png")
        server.routes["/again.png"] = Page(picture("orange", (12, 9)), content_type="image/png")
        server.routes["/fake.png"] = Page(b"GIF? no.", content_type="image/png")
        yield server


def assets_of(db: TimelineDb, platform_id: int) -> list[str]:
    rows = db.messages(platform_id)
    if not rows:
        return []
    segments = json.loads(rows[0]["segments"])
    return [s.get("media", {}).get("asset", "") for s in segments if s["kind"] == "image"]


async def test_the_same_picture_sent_twice_is_stored_once(
    running_bot: BotProcess, napcat: FakeNapCat, timeline: TimelineDb, cdn: FakeWebServer
) -> None:
    first = napcat.group_message(7301, 5101, [text("看"), image("a.png", cdn.url("/one.png"))])
    second = napcat.group_message(7302, 5102, [image("b.png", cdn.url("/again.png"))])
    fake = napcat.group_message(7301, 5101, [image("c.png", cdn.url("/fake.png"))])
    for event in (first, second, fake):
        await napcat.send_event(event)

    def kept() -> list[list[str]] | None:
        refs = [assets_of(timeline, e["message_id"]) for e in (first, second)]
        return refs if all(r and all(r) for r in refs) else None

    refs = await wait_for(kept, timeout=20, what="both pictures kept")
    assert refs[0] == refs[1] and refs[0][0].startswith("asset:")
    path = Path(running_bot.data_dir) / "assets" / refs[0][0].removeprefix("asset:")
    assert path.read_bytes() == picture("orange", (12, 9))
    rows = timeline.query("SELECT sha256, mime, width, height FROM asset WHERE path = ?",
                          refs[0][0].removeprefix("asset:"))  # fmt: skip
    assert [(r["mime"], r["width"], r["height"]) for r in rows] == [("image/png", 12, 9)]
    await wait_for(
        lambda: "/fake.png" in cdn.paths() and "not kept" in running_bot.log(),
        timeout=20,
        what="the fake picture refused",
    )
    assert assets_of(timeline, fake["message_id"]) == [""]
    assert timeline.messages(fake["message_id"])[0]["text"] == "[图片]"
