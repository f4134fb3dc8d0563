"""Guards of memory the suite had no test for, each written to fail on the bug it names: a
forgotten fact coming back through the "newest facts" recall, the bot's own or recalled lines
read as candidates, the cursor's line read twice, /忘记我 forgetting other people's entries,
and its confirmation never expiring."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.commands import CommandCall
from pallas.product.conversation.ingress import StoredMessage
from pallas.product.memory.candidates import pick_candidates
from pallas.product.memory.commands import FORGET_WINDOW, ForgetMeCommand
from pallas.product.memory.recall_reads import RecallScope, recall_entries
from pallas.product.memory.store import MemoryStatus, MemoryStore
from pallas.store.conversation import WindowLine
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import group, message
from tests.support.memory_facts import kept_fact, speaker

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
SELF_LINE = "我喜欢吃榴莲"  # a line the filter lets through


def line(mid: int, text: str = SELF_LINE, **flags: bool) -> WindowLine:
    return WindowLine(mid, str(mid), 7, "小明", "42", flags.get("from_bot", False), text, T0,
                      None, False, flags.get("recalled", False))  # fmt: skip


def test_the_bots_own_and_recalled_lines_are_never_candidates() -> None:
    lines = [line(1, from_bot=True), line(2, recalled=True), line(3)]
    assert [c.message_id for c in pick_candidates(lines, 0, 10)] == [3]


def test_the_cursors_own_line_is_not_read_again() -> None:
    lines = [line(5), line(6)]
    assert [c.message_id for c in pick_candidates(lines, 5, 10)] == [6]


async def test_a_forgotten_fact_does_not_come_back_as_a_newest_fact(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    ming = await speaker(writer, "42", "guards")
    store = MemoryStore(engine)
    kept = await kept_fact(store, ming, "小明养了一只猫", T0)
    gone = await kept_fact(store, ming, "小明住在杭州", T0)
    await store.forget(gone, T0, actor="test")
    scope = RecallScope(ming.stream_id, (ming.person_id,))
    # No query words match: what comes is the speaker's newest facts, the forgotten one not.
    found = await recall_entries(engine, ["今天天气"], scope, 5, always_about=(ming.person_id,))
    assert [hit.record.id for hit in found.hits] == [kept]


def _call(who: MessageWritten, args: str) -> CommandCall:
    said = message(f"/忘记我 {args}".strip(), stream=group("guards"), user_id="42")
    stored = StoredMessage(who.message_id, who.stream_id, who.person_id, said)
    return CommandCall("忘记我", args, stored)


async def test_forget_me_forgets_only_the_askers_entries_and_its_yes_expires(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    ming, hong = await speaker(writer, "42", "guards"), await speaker(writer, "43", "guards")
    store = MemoryStore(engine)
    mine = await kept_fact(store, ming, "小明养了一只猫", T0)
    hers = await kept_fact(store, hong, "小红喜欢芒果", T0)
    now = [T0]
    command = ForgetMeCommand(store, lambda: now[0])

    assert "一分钟内" in await command.run(_call(ming, ""))
    now[0] = T0 + FORGET_WINDOW + timedelta(seconds=1)  # too late: asked again, nothing gone
    assert "一分钟内" in await command.run(_call(ming, "确认"))
    assert (await store.get(mine)).status is MemoryStatus.ACTIVE  # type: ignore[union-attr]

    now[0] += timedelta(seconds=10)  # within the minute of the new question
    assert "都忘掉了" in await command.run(_call(ming, "确认"))
    assert (await store.get(mine)).status is MemoryStatus.FORGOTTEN  # type: ignore[union-attr]
    assert (await store.get(hers)).status is MemoryStatus.ACTIVE  # type: ignore[union-attr]
