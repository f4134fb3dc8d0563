"""The owner's persona commands on a real store: forgiving, blacklisting, reading how the bot
feels about someone and teaching it a note; every bad input answered with what went wrong."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKey
from pallas.product.conversation.commands import CommandCall, parse_command
from pallas.product.conversation.ingress import StoredMessage
from pallas.product.persona.commands import (
    BlacklistCommand,
    FavorCommand,
    LiftCommand,
    NoteCommand,
)
from pallas.product.persona.store import PersonaStore, RageWrite
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import BOT_ID, group, message, private

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OWNER = "1"


@dataclass
class Kit:
    engine: AsyncEngine
    writer: TimelineWriter
    store: PersonaStore

    async def write(self, text: str, *, user: str, stream: StreamKey) -> StoredMessage:
        inbound = message(text, stream=stream, user_id=user, time=T0)
        written = await self.writer.write(inbound)
        assert isinstance(written, MessageWritten)
        return StoredMessage(written.message_id, written.stream_id, written.person_id, inbound)

    async def run(self, text: str, where: StreamKey | None = None) -> str:
        """An owner's command, typed in their private chat with the bot (or in `where`)."""
        stored = await self.write(text, user=OWNER, stream=where or private(OWNER))
        commands = {
            c.name: c
            for c in (
                LiftCommand(self.engine, self.store, lambda: T0),
                BlacklistCommand(self.engine, self.store, lambda: T0),
                FavorCommand(self.engine, self.store, lambda: T0),
                NoteCommand(self.engine, self.store, lambda: T0),
            )
        }
        parsed = parse_command(text, commands)
        assert parsed is not None
        name, args = parsed
        return await commands[name].run(CommandCall(name, args, stored))


@pytest.fixture
async def kit(engine: AsyncEngine, writer: TimelineWriter) -> AsyncIterator[Kit]:
    yield Kit(engine, writer, PersonaStore(engine))


async def test_forgiving_someone_on_the_blacklist(kit: Kit) -> None:
    who = await kit.write("你好", user="42", stream=group("500"))
    sid, pid = who.stream_id, who.sender_person_id
    await kit.store.write_rage(RageWrite(sid, pid, 0.0, T0 + timedelta(minutes=30), "两次"), T0)
    assert await kit.run("/解除拉黑 500 42") == "好，不生TA的气了。"
    assert await kit.store.ignored_because(sid, pid, T0) is None
    assert await kit.store.blacklisted(sid) == []


async def test_forgiving_someone_who_was_never_blacklisted(kit: Kit) -> None:
    await kit.write("你好", user="42", stream=group("500"))
    assert await kit.run("/解除拉黑 500 42") == "TA本来就没被拉黑。"


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("/解除拉黑", "用法：/解除拉黑 <群号|私聊> <QQ>"),
        ("/解除拉黑 500", "用法：/解除拉黑 <群号|私聊> <QQ>"),
        ("/解除拉黑 500 42 43", "用法：/解除拉黑 <群号|私聊> <QQ>"),
        ("/解除拉黑 404 42", "我不在群 404 里，或者那里还没人说过话。"),
        ("/解除拉黑 500 404", "没见过 404 这个人。"),
        ("/拉黑 500", "用法：/拉黑 <群号|私聊> <QQ>"),
        ("/拉黑 404 42", "我不在群 404 里，或者那里还没人说过话。"),
        ("/好感", "用法：/好感 <QQ>（要是我见过的人）"),
        ("/好感 404", "用法：/好感 <QQ>（要是我见过的人）"),
        ("/备注 42", "用法：/备注 <QQ> <内容>（要是我见过的人）"),
        ("/备注 404 是群主的弟弟", "用法：/备注 <QQ> <内容>（要是我见过的人）"),
        ("/备注 42 叫他傻逼", "这条备注我不记：要短，而且不能骂人。"),
        ("/备注 42 " + "长" * 61, "这条备注我不记：要短，而且不能骂人。"),
    ],
)
async def test_bad_inputs_are_answered(kit: Kit, text: str, answer: str) -> None:
    await kit.write("你好", user="42", stream=group("500"))
    assert await kit.run(text) == answer


async def test_an_owner_s_blacklisting_lasts_until_lifted(kit: Kit) -> None:
    who = await kit.write("你好", user="42", stream=group("500"))
    sid, pid = who.stream_id, who.sender_person_id
    assert await kit.run("/拉黑 500 42") == "好，在群 500 里不理 42 了。"
    assert await kit.store.ignored_because(sid, pid, T0 + timedelta(days=90)) == "blacklisted"
    assert await kit.run("/解除拉黑 500 42") == "好，不生TA的气了。"
    assert await kit.store.ignored_because(sid, pid, T0) is None


async def test_reading_and_teaching_notes(kit: Kit) -> None:
    who = await kit.write("你好", user="42", stream=group("500"))
    pid = who.sender_person_id
    assert await kit.run("/好感 42") == "42：好感 0（普通）"
    await kit.store.set_favorability(BOT_ID, pid, 65.0, "", T0)
    await kit.store.add_note(BOT_ID, pid, "希望被叫作阿明", "observed", T0)
    assert await kit.run("/备注 42 是群主的   弟弟") == "记下了。"
    assert await kit.run("/备注 42 是群主的 弟弟") == "这条已经记着了。"
    notes = await kit.store.notes(BOT_ID, [pid])
    assert [(n.text, n.source) for n in notes] == [
        ("希望被叫作阿明", "observed"),
        ("是群主的 弟弟", "owner"),
    ]
    first, second = (n.id for n in notes)
    assert (await kit.run("/好感 42")).splitlines() == [
        "42：好感 65（亲近）",
        f"#{first} 希望被叫作阿明（TA自己说的）",
        f"#{second} 是群主的 弟弟（你教的）",
    ]


async def test_notes_about_someone_are_not_read_out_in_a_group_they_are_not_in(kit: Kit) -> None:
    who = await kit.write("你好", user="42", stream=group("500"))
    await kit.store.add_note(BOT_ID, who.sender_person_id, "是群主的弟弟", "owner", T0)
    await kit.write("大家好", user="43", stream=group("600"))
    assert await kit.run("/好感 42", group("600")) == "TA 不在这个群里：私聊我再看。"
    assert "是群主的弟弟" in await kit.run("/好感 42", group("500"))  # where TA is
    assert "是群主的弟弟" in await kit.run("/好感 42")  # the owner's private chat
