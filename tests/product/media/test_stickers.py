"""Sticker replies: which sticker fits a feeling (pure), a reply turned into a sticker message
from the bot's collection on a real store, and the agent's sticker tools."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import SegmentKind
from pallas.product.conversation.gate.facts import MessageFacts
from pallas.product.conversation.gate.gate import Disposition, Outcome, Reason, Signal
from pallas.product.conversation.ingress import StoredMessage
from pallas.product.conversation.turns.buffers import Batch
from pallas.product.conversation.turns.runner import build_turn
from pallas.product.conversation.turns.turn import Admitted, Turn
from pallas.product.llm.agent.output import Intent, IntentKind, shape_reply
from pallas.product.llm.agent.reply_forms import FormContext, FormEvent, ReplyShape
from pallas.product.llm.tools.base import Conversation, ToolContext, ToolError
from pallas.product.media.sticker_store import LibrarySticker, StickerLibrary
from pallas.product.media.sticker_tools import (
    SEARCH_LIMIT,
    StickerSearchTool,
    StickerSendTool,
    sticker_tools,
)
from pallas.product.media.stickers import (
    CHOSEN,
    MARK,
    StickerReply,
    is_attitude,
    match_score,
    pick_sticker,
)
from pallas.store.asset_store import AssetStore
from pallas.store.audit import EventKind
from tests.support.inbound import group, message
from tests.support.pictures import picture

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def sticker(
    name: str,
    caption: str,
    *emotions: str,
    uses: int = 0,
    sent: datetime | None = None,
) -> LibrarySticker:
    sha = (name * 64)[:64]
    return LibrarySticker(sha, f"{sha[:2]}/{sha}.png", caption, emotions, "group", uses, sent)


# Matching (pure).


def test_a_feeling_fits_a_label_better_than_a_caption_better_than_shared_words() -> None:
    cat = sticker("a", "猫猫无语", "无语", "嫌弃")
    assert match_score("无语", cat) == 3
    assert match_score(" 嫌弃 ", cat) == 3
    assert match_score("猫猫", cat) == 2  # part of the caption
    assert match_score("猫猫无语了吧", cat) == 2  # the caption inside the wish
    assert match_score("猫猫真可爱", cat) == 1  # a shared word (猫猫)
    assert match_score("开心", cat) == 0
    assert match_score("", cat) == 0
    assert match_score("   ", cat) == 0


def test_a_sticker_without_a_caption_fits_by_its_feelings_only() -> None:
    bare = sticker("b", "", "开心")
    assert match_score("开心", bare) == 3
    assert match_score("难过", bare) == 0


def test_the_best_fit_wins_whatever_was_sent_lately() -> None:
    labelled = sticker("a", "小狗", "开心", sent=T0)
    captioned = sticker("b", "开心到飞起")  # never sent, but only a caption fit
    assert pick_sticker("开心", [captioned, labelled], random.Random(1)) == labelled


def test_among_equal_fits_the_least_recently_sent_goes() -> None:
    lately = sticker("a", "猫", "开心", sent=T0 + timedelta(hours=1))
    before = sticker("b", "狗", "开心", sent=T0)
    never = sticker("c", "鸟", "开心")
    for seed in range(20):
        assert pick_sticker("开心", [lately, before], random.Random(seed)) == before
        assert pick_sticker("开心", [lately, before, never], random.Random(seed)) == never


def test_equal_fits_sent_alike_are_chosen_by_the_rng() -> None:
    one, two = sticker("a", "猫", "开心"), sticker("b", "狗", "开心")
    chosen = {pick_sticker("开心", [one, two], random.Random(seed)) for seed in range(40)}
    assert chosen == {one, two}
    first = pick_sticker("开心", [one, two], random.Random(7))
    assert all(pick_sticker("开心", [one, two], random.Random(7)) == first for _ in range(5))


def test_nothing_fits_is_none() -> None:
    assert pick_sticker("晚安", [sticker("a", "猫猫无语", "无语")], random.Random(1)) is None
    assert pick_sticker("晚安", [], random.Random(1)) is None
    assert pick_sticker("", [sticker("a", "猫猫无语", "无语")], random.Random(1)) is None


@pytest.mark.parametrize(
    ("bubbles", "attitude"),
    [
        ((), True),
        (("哈哈哈",), True),
        (("确实！！",), True),
        (("六个字刚刚好",), True),
        (("  好的~  ",), True),
        (("七个字就算多了吧",), False),
        (("好", "的"), False),
        (("这个问题我想了很久，其实答案就在你身边",), False),
    ],
)
def test_an_attitude_is_at_most_one_short_bubble(bubbles: tuple[str, ...], attitude: bool) -> None:
    assert is_attitude(bubbles) is attitude


# The reply form, on a real store.


@dataclass
class Shelf:
    library: StickerLibrary
    assets: AssetStore
    laugh: LibrarySticker
    speechless: LibrarySticker
    cheer: LibrarySticker


async def put(
    library: StickerLibrary,
    assets: AssetStore,
    color: str,
    caption: str,
    *emotions: str,
    at: int = 0,
) -> LibrarySticker:
    stored = await assets.put(picture(color, (10, 10)), T0)
    await library.add(stored.sha256, caption, emotions, "group", T0 + timedelta(minutes=at))
    [found] = [s for s in await library.enabled() if s.sha256 == stored.sha256]
    return found


@pytest.fixture
async def shelf(engine: AsyncEngine, tmp_path: Path) -> AsyncIterator[Shelf]:
    library, assets = StickerLibrary(engine), AssetStore(engine, tmp_path / "assets")
    laugh = await put(library, assets, "red", "哈哈大笑", "哈哈", "开心", at=0)
    speechless = await put(library, assets, "green", "猫猫无语", "无语", at=1)
    cheer = await put(library, assets, "blue", "加油打气", "加油", at=2)
    yield Shelf(library, assets, laugh, speechless, cheer)


def turn() -> Turn:
    disposition = Disposition(Outcome.FORCE, Reason.MENTIONED, frozenset({Signal.MENTIONED}))
    stored = StoredMessage(10, 1, 1, message("@牛牛 讲个笑话"))
    batch = Batch(1, (Admitted(stored, MessageFacts(), disposition),), may_wait=False)
    return build_turn(1, batch, disposition)


def context(intents: tuple[Intent, ...], choices: Mapping[str, Any] | None = None) -> FormContext:
    return FormContext(turn(), intents, dict(choices or {}), T0)


async def shaped(
    shelf: Shelf, raw: str, choices: Mapping[str, Any] | None = None
) -> tuple[ReplyShape, ReplyShape]:
    """The reply as the model's text makes it, and as the sticker form leaves it."""
    model_said = shape_reply(raw)
    before = ReplyShape(model_said.bubbles)
    form = StickerReply(shelf.library, lambda: random.Random(3))
    return before, await form.shape(before, context(model_said.intents, choices))


async def test_a_sticker_intent_alone_becomes_the_sticker_message(shelf: Shelf) -> None:
    _, after = await shaped(shelf, "[表情:哈哈]")
    assert after.bubbles == () and after.events == ()
    [media] = after.media
    assert media.segment.kind is SegmentKind.IMAGE
    assert media.segment.text == "[动画表情：哈哈大笑]"
    assert media.segment.media is not None
    assert media.segment.media.file == f"asset:{shelf.laugh.path}"
    assert (shelf.assets.folder / shelf.laugh.path).is_file()
    assert dict(media.marks) == {MARK: shelf.laugh.sha256}


async def test_a_short_attitude_with_the_intent_goes_out_as_the_sticker_alone(
    shelf: Shelf,
) -> None:
    _, after = await shaped(shelf, "哈哈哈[表情:哈哈]")
    assert after.bubbles == ()
    assert [dict(m.marks) for m in after.media] == [{MARK: shelf.laugh.sha256}]


async def test_longer_words_are_kept_and_the_sticker_follows(shelf: Shelf) -> None:
    words = "这个问题我想了很久，其实答案就在你身边，多看看书吧"
    _, after = await shaped(shelf, f"{words}[表情:加油]")
    assert after.bubbles == (words,)
    assert [m.segment.text for m in after.media] == ["[动画表情：加油打气]"]
    assert [dict(m.marks) for m in after.media] == [{MARK: shelf.cheer.sha256}]


async def test_no_fitting_sticker_leaves_the_reply_and_notes_the_miss(shelf: Shelf) -> None:
    before, after = await shaped(shelf, "晚安[表情:晚安]")
    assert (after.bubbles, after.media) == (before.bubbles, ()) == (("晚安",), ())
    assert after.events == (FormEvent(EventKind.STICKER_MISSED, "晚安", {"stickers": 3}),)


async def test_a_reply_without_intent_or_choice_is_left_alone(shelf: Shelf) -> None:
    before, after = await shaped(shelf, "今天天气不错")
    assert after == before


async def test_a_mood_is_no_sticker_intent(shelf: Shelf) -> None:
    form = StickerReply(shelf.library, lambda: random.Random(3))
    reply = ReplyShape(("哈哈",))
    mood = (Intent(IntentKind.MOOD, "开心"), Intent(IntentKind.STICKER, ""))
    assert await form.shape(reply, context(mood)) == reply


async def test_a_disabled_sticker_is_never_picked(shelf: Shelf) -> None:
    assert await shelf.library.set_enabled(shelf.speechless.sha256, False)
    _, after = await shaped(shelf, "[表情:无语]")
    assert after.media == ()
    assert after.events == (FormEvent(EventKind.STICKER_MISSED, "无语", {"stickers": 2}),)


async def test_a_sticker_chosen_by_the_tool_wins_over_the_intent(shelf: Shelf) -> None:
    _, after = await shaped(shelf, "[表情:哈哈]", {CHOSEN: shelf.speechless.sha256})
    assert [dict(m.marks) for m in after.media] == [{MARK: shelf.speechless.sha256}]
    _, alone = await shaped(shelf, "行吧", {CHOSEN: shelf.cheer.sha256})
    assert alone.bubbles == ()  # a short attitude: the sticker says it
    assert [dict(m.marks) for m in alone.media] == [{MARK: shelf.cheer.sha256}]


async def test_a_chosen_sticker_no_longer_in_the_collection_falls_back_to_the_intent(
    shelf: Shelf,
) -> None:
    await shelf.library.set_enabled(shelf.cheer.sha256, False)
    _, after = await shaped(shelf, "[表情:无语]", {CHOSEN: shelf.cheer.sha256})
    assert [dict(m.marks) for m in after.media] == [{MARK: shelf.speechless.sha256}]
    _, nothing = await shaped(shelf, "好", {CHOSEN: shelf.cheer.sha256})
    assert nothing.bubbles == ("好",) and nothing.media == ()
    assert nothing.events == (FormEvent(EventKind.STICKER_MISSED, "", {"stickers": 2}),)


# The tools, on a real store.


def tool_context(engine: AsyncEngine) -> ToolContext:
    return ToolContext(Conversation(1, group()), turn_id=1, watermark=0, engine=engine, now=T0)


def short(item: LibrarySticker) -> str:
    return item.sha256[:8]


async def test_search_finds_stickers_by_feeling_and_word(shelf: Shelf, engine: AsyncEngine) -> None:
    search = StickerSearchTool(shelf.library, random.Random)
    found = await search.run({"query": "无语"}, tool_context(engine))
    assert found.data == {
        "结果": [{"id": short(shelf.speechless), "说明": "猫猫无语", "情绪": ["无语"]}]
    }
    nothing = await search.run({"query": "晚安"}, tool_context(engine))
    assert nothing.data == {"结果": []}


async def test_search_without_a_query_lists_the_most_used(
    shelf: Shelf, engine: AsyncEngine
) -> None:
    for _ in range(3):
        await shelf.library.count_sent(shelf.cheer.sha256, T0)
    await shelf.library.count_sent(shelf.speechless.sha256, T0)
    listed = await StickerSearchTool(shelf.library, random.Random).run({}, tool_context(engine))
    ids = [item["id"] for item in listed.data["结果"]]
    assert ids == [short(shelf.cheer), short(shelf.speechless), short(shelf.laugh)]
    assert len(ids) <= SEARCH_LIMIT


async def test_search_of_an_empty_collection_says_so(engine: AsyncEngine) -> None:
    search, _ = sticker_tools(StickerLibrary(engine), random.Random)
    found = await search.run({"query": "开心"}, tool_context(engine))
    assert found.data == {"结果": [], "说明": "还没有收藏的表情包"}


async def test_send_puts_the_choice_on_the_turn(shelf: Shelf, engine: AsyncEngine) -> None:
    send = StickerSendTool(shelf.library, lambda: random.Random(1))
    ctx = tool_context(engine)
    result = await send.run({"sticker_id": short(shelf.speechless).upper()}, ctx)
    assert ctx.choices == {CHOSEN: shelf.speechless.sha256}
    assert result.data["已选"]["id"] == short(shelf.speechless)
    by_feeling = tool_context(engine)
    await send.run({"emotion": "加油"}, by_feeling)
    assert by_feeling.choices == {CHOSEN: shelf.cheer.sha256}


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ({"sticker_id": "deadbeef"}, "没有这张表情包"),
        ({"sticker_id": "  "}, "没有适合“”的表情包"),
        ({"emotion": "晚安"}, "没有适合“晚安”的表情包"),
        ({}, "没有适合“”的表情包"),
    ],
)
async def test_send_refuses_what_the_collection_does_not_hold(
    shelf: Shelf, engine: AsyncEngine, arguments: dict[str, str], why: str
) -> None:
    ctx = tool_context(engine)
    with pytest.raises(ToolError, match=why):
        await StickerSendTool(shelf.library, lambda: random.Random(1)).run(arguments, ctx)
    assert ctx.choices == {}


async def test_send_refuses_a_disabled_sticker(shelf: Shelf, engine: AsyncEngine) -> None:
    await shelf.library.set_enabled(shelf.laugh.sha256, False)
    ctx = tool_context(engine)
    with pytest.raises(ToolError, match="没有这张表情包"):
        await StickerSendTool(shelf.library, random.Random).run(
            {"sticker_id": short(shelf.laugh)}, ctx
        )
    assert ctx.choices == {}


async def test_the_tools_choice_is_what_the_reply_sends(shelf: Shelf, engine: AsyncEngine) -> None:
    ctx = tool_context(engine)
    await StickerSendTool(shelf.library, random.Random).run({"sticker_id": short(shelf.laugh)}, ctx)
    _, after = await shaped(shelf, "[表情:无语]", ctx.choices)
    assert [dict(m.marks) for m in after.media] == [{MARK: shelf.laugh.sha256}]


def test_the_tools_are_deferred_and_known_by_their_names(shelf: Shelf) -> None:
    search, send = sticker_tools(shelf.library, random.Random)
    assert (search.spec.name, send.spec.name) == ("sticker.search", "sticker.send")
    assert search.spec.read_only and not send.spec.read_only
    assert search.spec.visibility.value == "deferred" == send.spec.visibility.value
    assert "表情包" in search.spec.hints
