"""The person page's memory edits on a real store: they touch only the page's person, write
the memory's change log as `console`, and a forgetting can be put back (memory/console.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.memory.console import memory_actions, memory_facet
from pallas.product.memory.store import MemoryStatus, MemoryStore
from pallas.store.timeline import TimelineWriter
from tests.support.memory_facts import kept_fact, speaker

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


async def test_edits_touch_only_this_persons_entries_and_are_logged(
    engine: AsyncEngine, writer: TimelineWriter
) -> None:
    ming, hong = await speaker(writer, "42", "600"), await speaker(writer, "43", "600")
    store = MemoryStore(engine)
    mine = await kept_fact(store, ming, "小明喜欢榴莲", T0)
    hers = await kept_fact(store, hong, "小红喜欢芒果", T0)
    act = memory_actions(store)

    # A form that names someone else's entry, or no entry, changes nothing.
    assert not await act["memory_edit"](ming.person_id, {"entry_id": str(hers), "text": "x"}, T0)
    assert not await act["memory_forget"](ming.person_id, {"entry_id": "nope"}, T0)
    assert not await act["memory_edit"](ming.person_id, {"entry_id": str(mine), "text": "  "}, T0)
    assert (await store.get(hers)).text == "小红喜欢芒果"  # type: ignore[union-attr]

    reworded = {"entry_id": str(mine), "text": "小明爱吃  榴莲"}
    assert await act["memory_edit"](ming.person_id, reworded, T0)
    assert (await store.get(mine)).text == "小明爱吃 榴莲"  # type: ignore[union-attr]
    assert await act["memory_forget"](ming.person_id, {"entry_id": str(mine)}, T0)
    assert (await store.get(mine)).status is MemoryStatus.FORGOTTEN  # type: ignore[union-attr]

    page = await memory_facet(store)(ming.person_id, ())
    assert page["facts"] == []
    # Only the entry's newest change is offered: undoing the correction now would lose the
    # forgetting built on it.
    [forgotten] = page["memory_changes"]
    assert (forgotten["what"], forgotten["before"]) == ("忘掉了", "小明爱吃 榴莲")
    [corrected] = [c for c in await store.changes(mine) if c.action == "corrected"]
    assert not await act["memory_restore"](ming.person_id, {"change_id": str(corrected.id)}, T0)
    other = await memory_facet(store)(hong.person_id, ())
    assert not await act["memory_restore"](hong.person_id, {"change_id": str(forgotten["id"])}, T0)
    assert other["memory_changes"] == []
    assert await act["memory_restore"](ming.person_id, {"change_id": str(forgotten["id"])}, T0)
    assert (await store.get(mine)).status is MemoryStatus.ACTIVE  # type: ignore[union-attr]
    actors = [change.actor for change in await store.changes(mine)]
    assert actors == ["job:1", "console", "console", "console"]
