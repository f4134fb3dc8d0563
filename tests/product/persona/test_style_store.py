"""The bot's own voice in the store, on both backends: the mood, chat sessions, and the
nightly fingerprint over real timeline rows."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import Origin
from pallas.product.persona.own_style import learn_fingerprint
from pallas.product.persona.style_store import (
    BotStyleStore,
    StoredSession,
    accounts,
    replies_with_answers,
)
from pallas.store.jobs import ClaimedJob
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import BOT_ID, group, message

T0 = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)


async def test_mood_and_sessions(engine: AsyncEngine, writer: TimelineWriter) -> None:
    store = BotStyleStore(engine)
    assert await store.mood("1") == (0.0, None)
    await store.set_mood("1", 0.4, T0)
    assert await store.mood("1") == (0.4, T0)
    written = await writer.write(message("你好", time=T0))
    assert isinstance(written, MessageWritten)
    assert await store.session(written.stream_id) is None
    session = StoredSession(T0, "懒洋洋的", "你们上次聊天是3天前")
    await store.set_session(written.stream_id, session)
    assert await store.session(written.stream_id) == session
    later = await writer.write(message("在吗", time=T0))
    assert isinstance(later, MessageWritten)
    assert await store.last_seen_before(written.stream_id, later.message_id) == T0
    assert await store.last_seen_before(written.stream_id, written.message_id) is None


async def test_the_fingerprint_learns_from_replies_that_landed(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    chat = group("voice")
    lines = [
        ("害，就这呗", True, None),
        ("哈哈哈哈", False, None),
        ("走呗", True, "bot-2"),
        ("嗯", False, "bot-2"),  # quotes the bot's line: it landed
        ("不去啦", True, None),
        ("嗯嗯", False, None),
        ("命令：/帮助 看看呗", True, None),  # a command's answer: not the bot's own voice
        ("哈哈", False, None),
    ]
    for i, (text, from_bot, quote) in enumerate(lines):
        user = BOT_ID if from_bot else "42"
        pid = f"bot-{i}" if from_bot else None
        inbound = message(text, stream=chat, user_id=user, from_bot=from_bot, reply_to=quote,
                          platform_message_id=pid)  # fmt: skip
        if text.startswith("命令"):
            inbound = replace(inbound, origin=Origin.COMMAND)
        assert isinstance(await writer.write(inbound), MessageWritten)
    assert await accounts(engine) == [BOT_ID]
    rows = await replies_with_answers(engine, BOT_ID, limit=10, answers=1)
    assert [(r.text, r.answers, r.quoted) for r in rows] == [
        ("不去啦", ("嗯嗯",), False),
        ("走呗", ("嗯",), True),
        ("害，就这呗", ("哈哈哈哈",), False),
    ]
    store = BotStyleStore(engine)
    job = ClaimedJob(1, "persona.fingerprint", {}, None, 1, 3, T0)
    await learn_fingerprint(job, engine, store, lambda: T0)
    assert await store.phrases(BOT_ID) == ["呗"]  # 害 once, 呗 twice, 啦 did not land
