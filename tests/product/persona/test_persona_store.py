"""The persona store on SQLite and PostgreSQL: rage and its silences, who is ignored (also
after a restart), lifting, the owner's blacklist, favorability, relation notes and the
look-ups the owner's commands use."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKey
from pallas.product.persona.store import (
    BLACKLISTED,
    MAX_NOTES,
    SILENCED,
    PersonaStore,
    RageRow,
    RageWrite,
    person_of,
    senders_of,
)
from pallas.product.persona.tables import Blacklist, RelationNote
from pallas.store.conversation import chat_of
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import BOT_ID, group, message, private

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SILENCE = timedelta(minutes=30)


async def said(
    writer: TimelineWriter,
    text: str = "你好",
    *,
    user: str = "42",
    stream: StreamKey | None = None,
    from_bot: bool = False,
) -> MessageWritten:
    written = await writer.write(
        message(text, stream=stream or group("500"), user_id=user, time=T0, from_bot=from_bot)
    )
    assert isinstance(written, MessageWritten)
    return written


async def test_rage_is_written_and_read_with_its_silences(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PersonaStore(engine)
    who = await said(writer)
    sid, pid = who.stream_id, who.person_id
    assert await store.rage(sid, pid) is None
    assert await store.silences_since(sid, pid, T0 - timedelta(days=1)) == []

    await store.write_rage(RageWrite(sid, pid, 4.0, None), T0)
    assert await store.rage(sid, pid) == RageRow(4.0, T0, None)
    assert await store.silences_since(sid, pid, T0 - timedelta(days=1)) == []  # only angrier

    later = T0 + timedelta(minutes=5)
    await store.write_rage(RageWrite(sid, pid, 0.0, later + SILENCE), later)
    assert await store.rage(sid, pid) == RageRow(0.0, later, later + SILENCE)
    assert await store.silences_since(sid, pid, T0) == [later]
    assert await store.silences_since(sid, pid, later) == [later]  # the edge is included
    assert await store.silences_since(sid, pid, later + timedelta(seconds=1)) == []


async def test_a_silence_ignores_the_person_until_it_ends_even_after_a_restart(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PersonaStore(engine)
    who = await said(writer)
    other = await said(writer, user="43")
    sid, pid = who.stream_id, who.person_id
    assert await store.ignored_because(sid, pid, T0) is None
    await store.write_rage(RageWrite(sid, pid, 0.0, T0 + SILENCE), T0)

    for reader in (store, PersonaStore(engine)):  # the same store, then after a restart
        assert await reader.ignored_because(sid, pid, T0) == SILENCED == "rage"
        assert await reader.ignored_because(sid, pid, T0 + SILENCE / 2) == "rage"
        assert await reader.ignored_because(sid, pid, T0 + SILENCE) is None  # it has ended
        assert await reader.ignored_because(sid, pid, T0 + SILENCE * 2) is None
        assert await reader.ignored_because(sid, other.person_id, T0) is None


async def test_the_blacklist_ignores_the_person_for_good_even_after_a_restart(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PersonaStore(engine)
    who = await said(writer)
    elsewhere = await said(writer, stream=group("600"))
    sid, pid = who.stream_id, who.person_id
    write = RageWrite(sid, pid, 0.0, T0 + SILENCE, blacklist_reason="两次静默不到24小时")
    await store.write_rage(write, T0)

    far = T0 + timedelta(days=365)
    for reader in (store, PersonaStore(engine)):
        assert await reader.ignored_because(sid, pid, T0) == BLACKLISTED == "blacklisted"
        assert await reader.ignored_because(sid, pid, far) == "blacklisted"
        # The blacklist is the chat's: the same person elsewhere is not ignored.
        assert await reader.ignored_because(elsewhere.stream_id, pid, T0) is None
        assert await reader.blacklisted(sid) == [pid]
    async with engine.connect() as conn:
        row = (await conn.execute(select(Blacklist))).one()
    assert (row.source, row.reason, row.added_at, row.lifted_at) == (
        "auto",
        "两次静默不到24小时",
        T0,
        None,
    )
    assert await store.silences_since(sid, pid, T0) == [T0]  # it was a silence too


async def test_lifting_clears_the_blacklist_the_silence_and_the_pressure(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PersonaStore(engine)
    who = await said(writer)
    sid, pid = who.stream_id, who.person_id
    await store.write_rage(RageWrite(sid, pid, 0.0, T0 + SILENCE, "两次静默"), T0)
    await store.ignored_because(sid, pid, T0)  # the map is loaded: lifting must update it

    lifted_at = T0 + timedelta(minutes=1)
    assert await store.lift(sid, pid, lifted_at) is True
    assert await store.ignored_because(sid, pid, lifted_at) is None
    assert await store.blacklisted(sid) == []
    assert await store.rage(sid, pid) == RageRow(0.0, lifted_at, None)
    assert await PersonaStore(engine).ignored_because(sid, pid, lifted_at) is None
    async with engine.connect() as conn:
        row = (await conn.execute(select(Blacklist))).one()
    assert row.lifted_at == lifted_at  # kept, as lifted


async def test_lifting_a_silence_alone(engine: AsyncEngine, writer: TimelineWriter) -> None:
    store = PersonaStore(engine)
    who = await said(writer)
    sid, pid = who.stream_id, who.person_id
    await store.write_rage(RageWrite(sid, pid, 0.0, T0 + SILENCE), T0)
    assert await store.lift(sid, pid, T0) is True
    assert await store.ignored_because(sid, pid, T0) is None
    assert await PersonaStore(engine).ignored_because(sid, pid, T0) is None


async def test_lifting_someone_never_angered_lifts_nothing(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PersonaStore(engine)
    who = await said(writer)
    assert await store.lift(who.stream_id, who.person_id, T0) is False


async def test_lifting_twice_lifts_nothing_the_second_time(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    """After a lift the person is neither blacklisted, silenced nor angry: the owner's second
    /解除拉黑 must answer "TA本来就没被拉黑。", so lift() has nothing to report."""
    store = PersonaStore(engine)
    who = await said(writer)
    sid, pid = who.stream_id, who.person_id
    await store.write_rage(RageWrite(sid, pid, 0.0, T0 + SILENCE, "两次静默"), T0)
    assert await store.lift(sid, pid, T0 + timedelta(minutes=1)) is True
    assert await store.lift(sid, pid, T0 + timedelta(minutes=2)) is False


async def test_an_owner_s_blacklisting(engine: AsyncEngine, writer: TimelineWriter) -> None:
    store = PersonaStore(engine)
    who = await said(writer)
    sid, pid = who.stream_id, who.person_id
    await store.blacklist(sid, pid, "号主拉黑", T0)
    assert await store.ignored_because(sid, pid, T0 + timedelta(days=30)) == "blacklisted"
    assert await PersonaStore(engine).ignored_because(sid, pid, T0) == "blacklisted"
    async with engine.connect() as conn:
        row = (await conn.execute(select(Blacklist))).one()
    assert (row.source, row.reason) == ("owner", "号主拉黑")
    # Blacklisting again after a lift puts them back.
    assert await store.lift(sid, pid, T0) is True
    await store.blacklist(sid, pid, "号主拉黑", T0 + timedelta(hours=1))
    assert await PersonaStore(engine).blacklisted(sid) == [pid]


async def test_favorability_defaults_and_is_kept_per_bot_account(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PersonaStore(engine)
    ming = await said(writer)
    hong = await said(writer, user="43")
    assert await store.favorability(BOT_ID, ming.person_id) == (0.0, "")
    assert await store.scores(BOT_ID, [ming.person_id, hong.person_id]) == {}

    await store.set_favorability(BOT_ID, ming.person_id, 12.5, "2026-12-01", T0)
    await store.set_favorability(BOT_ID, hong.person_id, -30.0, "", T0)
    assert await store.favorability(BOT_ID, ming.person_id) == (12.5, "2026-12-01")
    await store.set_favorability(BOT_ID, ming.person_id, 14.5, "2026-12-02", T0)
    assert await store.favorability(BOT_ID, ming.person_id) == (14.5, "2026-12-02")
    assert await store.scores(BOT_ID, [ming.person_id, hong.person_id]) == {
        ming.person_id: 14.5,
        hong.person_id: -30.0,
    }
    assert await store.scores(BOT_ID, [hong.person_id]) == {hong.person_id: -30.0}
    # Another bot account has its own feelings.
    assert await store.favorability("20000", ming.person_id) == (0.0, "")


async def test_a_note_is_kept_once(engine: AsyncEngine, writer: TimelineWriter) -> None:
    store = PersonaStore(engine)
    pid = (await said(writer)).person_id
    assert await store.add_note(BOT_ID, pid, "希望被叫作阿明", "observed", T0) is True
    assert await store.add_note(BOT_ID, pid, "希望被叫作阿明", "observed", T0) is False
    assert await store.add_note(BOT_ID, pid, "希望被叫作阿明", "owner", T0) is False
    notes = await store.notes(BOT_ID, [pid])
    assert [(n.person_id, n.text, n.source) for n in notes] == [(pid, "希望被叫作阿明", "observed")]
    assert await store.notes("20000", [pid]) == []  # another bot account's notes


async def test_observed_notes_make_room_but_an_owner_s_never_go(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PersonaStore(engine)
    pid = (await said(writer)).person_id
    for i in range(3):
        assert await store.add_note(BOT_ID, pid, f"owner {i}", "owner", T0)
    for i in range(MAX_NOTES):
        assert await store.add_note(BOT_ID, pid, f"seen {i}", "observed", T0)
    texts = [n.text for n in await store.notes(BOT_ID, [pid])]
    assert len(texts) == MAX_NOTES
    assert texts[:3] == ["owner 0", "owner 1", "owner 2"]
    assert texts[3:] == [f"seen {i}" for i in range(3, MAX_NOTES)]  # the oldest made room

    for i in range(3, MAX_NOTES + 2):  # more owner notes than there is room for
        assert await store.add_note(BOT_ID, pid, f"owner {i}", "owner", T0)
    notes = await store.notes(BOT_ID, [pid])
    assert [n.text for n in notes] == [f"owner {i}" for i in range(MAX_NOTES + 2)]
    assert {n.source for n in notes} == {"owner"}


async def test_a_dropped_note_is_gone_and_may_be_added_again(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PersonaStore(engine)
    pid = (await said(writer)).person_id
    await store.add_note(BOT_ID, pid, "是小红的哥哥", "observed", T0)
    [note] = await store.notes(BOT_ID, [pid])
    assert await store.drop_note(note.id) is True
    assert await store.notes(BOT_ID, [pid]) == []
    assert await store.drop_note(note.id + 1000) is False
    assert await store.add_note(BOT_ID, pid, "是小红的哥哥", "observed", T0) is True
    async with engine.connect() as conn:
        rows = (await conn.execute(select(RelationNote.active).order_by(RelationNote.id))).all()
    assert [r.active for r in rows] == [False, True]


async def test_the_look_ups_of_the_owner_s_commands(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    ming = await said(writer)
    hong = await said(writer, user="43")
    bot = await said(writer, "嗯嗯", user=BOT_ID, from_bot=True)
    await said(writer, "私聊", user="44", stream=private("44"))

    assert await person_of(engine, "qq", "42") == ming.person_id
    assert await person_of(engine, "qq", "43") == hong.person_id
    assert await person_of(engine, "qq", "404") is None
    assert await chat_of(engine, "qq", BOT_ID, "group", "500") == ming.stream_id
    assert await chat_of(engine, "qq", BOT_ID, "group", "404") is None
    # A group is every account's; a private chat is one account's.
    assert await chat_of(engine, "qq", "20000", "group", "500") == ming.stream_id
    assert await chat_of(engine, "qq", "20000", "private", "44") is None
    assert await chat_of(engine, "qq", BOT_ID, "private", "44") is not None
    assert await chat_of(engine, "qq", BOT_ID, "group", "44") is None  # a private chat is no group

    again = await said(writer, "又来了")
    ids = [ming.message_id, hong.message_id, bot.message_id, again.message_id]
    assert await senders_of(engine, ids) == [ming.person_id, hong.person_id]
    assert await senders_of(engine, []) == []


async def test_forgiveness_starts_the_count_of_silences_afresh(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PersonaStore(engine)
    who = await said(writer)
    sid, pid = who.stream_id, who.person_id
    await store.write_rage(RageWrite(sid, pid, 0.0, T0 + SILENCE), T0)
    assert await store.silences_since(sid, pid, T0 - timedelta(days=1)) == [T0]
    assert await store.lift(sid, pid, T0 + timedelta(minutes=1)) is True
    assert await store.silences_since(sid, pid, T0 - timedelta(days=1)) == []
    later = T0 + timedelta(hours=1)
    await store.write_rage(RageWrite(sid, pid, 0.0, later + SILENCE), later)
    assert await store.silences_since(sid, pid, T0 - timedelta(days=1)) == [later]


async def test_an_observation_waits_while_the_owner_s_notes_fill_every_place(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    store = PersonaStore(engine)
    who = await said(writer)
    for i in range(MAX_NOTES):
        assert await store.add_note(BOT_ID, who.person_id, f"号主教的第{i}条", "owner", T0)
    assert await store.add_note(BOT_ID, who.person_id, "希望被叫作阿明", "observed", T0) is False
    texts = [note.text for note in await store.notes(BOT_ID, [who.person_id])]
    assert len(texts) == MAX_NOTES and "希望被叫作阿明" not in texts
