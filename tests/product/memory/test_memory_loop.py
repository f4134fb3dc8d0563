"""Memory through the real kernel and agent, on a real store, with the scripted model server:
taught in chat, extracted by the job, recalled in a later turn, corrected, forgotten, kept out
of another group, refused when profane."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from pallas.app import Runtime
from pallas.product.memory.config import MemoryConfig
from pallas.product.memory.extraction import EXTRACT_KIND
from pallas.product.memory.feature import memory_extension
from pallas.product.memory.store import MemoryStatus, MemoryStore
from pallas.store.models import Job
from tests.product.llm.agent.harness import (
    CHAT_MODEL,
    RecordingOutlet,
    ledger,
    say,
    settle,
    start_agent,
)
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.inbound import BOT_ID, group, message, private
from tests.support.waiting import until, until_async

MODEL = CHAT_MODEL
MING = "42"


def call(name: str, **arguments: object) -> Reply:
    return Reply("", (ToolCallSpec(name, json.dumps(arguments, ensure_ascii=False)),))


def remember(message_id: int, text: str, about: str | None = MING, kind: str = "fact") -> Reply:
    return call(
        "memory__remember", message_id=message_id, about_user_id=about, kind=kind, text=text
    )


MEMORY = memory_extension(MemoryConfig(extraction_delay_s=0))


@pytest.fixture
async def runtime(
    tmp_path: Path, store_url: str, model_server: FakeModelServer, outlet: RecordingOutlet
) -> AsyncIterator[Runtime]:
    runtime = await start_agent(
        tmp_path,
        store_url,
        outlet=outlet,
        features=[MEMORY],
        llm_base_url=model_server.base_url,
        llm_model=MODEL,
    )
    yield runtime
    await runtime.stop()


@pytest.fixture
def outlet() -> RecordingOutlet:
    return RecordingOutlet()


async def at_bot(
    runtime: Runtime,
    text: str,
    room: str = "g1",
    user_id: str = MING,
    then: Callable[[int], None] | None = None,
    role: str = "",
) -> int:
    """Say it to the bot and let the turn run; `then(message_id)` scripts what comes after
    the turn's own calls (the extraction), before the turn starts."""
    mid = await say(
        runtime,
        message(
            f"@牛牛 {text}", stream=group(room), user_id=user_id, mentions=(BOT_ID,), role=role
        ),
    )
    if then is not None:
        then(mid)
    await settle(runtime)
    return mid


async def extracted(runtime: Runtime, count: int) -> None:
    """Until the extraction jobs have run and `count` entries are active."""
    await until_async(lambda: _job_idle(runtime))

    async def active() -> bool:
        return len(await MemoryStore(runtime.engine).entries()) == count

    await until_async(active)


async def _job_idle(runtime: Runtime) -> bool:
    """No extraction is waiting or running (periodic jobs are always pending)."""
    query = select(func.count()).where(
        Job.kind == EXTRACT_KIND, Job.status.in_(("pending", "running"))
    )
    async with runtime.engine.connect() as conn:
        return not await conn.scalar(query)


def last_prompt(server: FakeModelServer) -> str:
    """The newest turn's prompt: an extraction may run (and call the model) after the turn."""
    turns = [r for r in server.requests_for(MODEL) if "reply" in _tool_names(r.body)]
    return str(turns[-1].body["messages"][-1]["content"])


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools", [])}


def offered(server: FakeModelServer) -> set[str]:
    body: dict[str, Any] = server.requests_for(MODEL)[-1].body
    return {tool["function"]["name"] for tool in body.get("tools", [])}


async def test_taught_recalled_corrected_and_forgotten(
    runtime: Runtime, model_server: FakeModelServer
) -> None:
    # 1. Taught: the turn replies, then the job extracts the fact.
    model_server.script(MODEL, call("reply", text="好，记住了"))
    taught_id = await at_bot(
        runtime,
        "记住，我最喜欢吃榴莲",
        then=lambda mid: model_server.script(MODEL, remember(mid, "小明最喜欢吃榴莲")),
    )
    await extracted(runtime, 1)
    [entry] = await MemoryStore(runtime.engine).entries()
    assert (entry.text, entry.source_message_ids) == ("小明最喜欢吃榴莲", (taught_id,))
    extraction = model_server.requests_for(MODEL)[-1].body
    assert (
        json.loads(extraction["messages"][-1]["content"])["messages"][0]["message_id"] == taught_id
    )

    # 2. Recalled in a later turn's prompt, and the trace says keyword.
    model_server.script(MODEL, call("reply", text="榴莲呀"))
    await at_bot(runtime, "我最喜欢吃什么水果")
    assert "小明最喜欢吃榴莲" in last_prompt(model_server)
    assembled = await ledger(runtime.engine, "context_assembled")
    assert assembled[-1].payload["sources"]["memory"]["mode"] == "keyword"
    assert assembled[-1].payload["sources"]["memory"]["found"] == [entry.id]

    # 3. Corrected: "you remembered that wrong".
    model_server.script(
        MODEL,
        call("memory__correct", memory_id=entry.id, text="小明最喜欢吃芒果"),
        call("reply", text="好，改了"),
    )
    await at_bot(runtime, "你记错了，我最喜欢的是芒果不是榴莲")
    corrected = await MemoryStore(runtime.engine).get(entry.id)
    assert corrected is not None and corrected.text == "小明最喜欢吃芒果"

    # 4. Forgotten.
    model_server.script(
        MODEL, call("memory__forget", memory_id=entry.id), call("reply", text="忘掉了")
    )
    await at_bot(runtime, "把我爱吃的东西忘掉吧")
    forgotten = await MemoryStore(runtime.engine).get(entry.id)
    assert forgotten is not None and forgotten.status is MemoryStatus.FORGOTTEN
    model_server.script(MODEL, call("reply", text="不知道"))
    await at_bot(runtime, "我最喜欢吃什么水果")
    assert "芒果" not in last_prompt(model_server).split("【聊天记录】")[0]


async def test_another_group_needs_consent(runtime: Runtime, model_server: FakeModelServer) -> None:
    model_server.script(MODEL, call("reply", text="好"))
    await at_bot(
        runtime,
        "我对花生过敏，记住哦",
        then=lambda mid: model_server.script(MODEL, remember(mid, "小明对花生过敏")),
    )
    await extracted(runtime, 1)
    model_server.script(MODEL, call("reply", text="嗯"))
    await at_bot(runtime, "花生能吃吗", room="g2")
    assert "小明对花生过敏" not in last_prompt(model_server)
    [entry] = await MemoryStore(runtime.engine).entries()
    assert entry.person_id is not None
    await MemoryStore(runtime.engine).grant_consent(entry.person_id, entry.created_at)
    model_server.script(MODEL, call("reply", text="你过敏"))
    await at_bot(runtime, "花生能吃吗", room="g2")
    assert "小明对花生过敏" in last_prompt(model_server)


async def test_a_profane_fact_and_a_fact_about_someone_else_are_refused(
    runtime: Runtime, model_server: FakeModelServer
) -> None:
    await say(runtime, message("我是小红", stream=group("g1"), user_id="43", nickname="小红"))
    model_server.script(MODEL, call("reply", text="？"))

    def proposals(mid: int) -> None:
        calls = [
            {"message_id": mid, "about_user_id": "43", "kind": "fact", "text": text}
            for text in ("小红是傻逼", "小红是学生")
        ]
        specs = tuple(
            ToolCallSpec("memory__remember", json.dumps(c, ensure_ascii=False)) for c in calls
        )
        model_server.script(MODEL, Reply("", specs))

    await at_bot(runtime, "记住，我是你爹，小红是傻逼", then=proposals)
    await until_async(lambda: _job_idle(runtime))
    await until(lambda: len(model_server.requests_for(MODEL)) == 2, timeout=10)
    await until_async(lambda: _job_idle(runtime))
    assert await MemoryStore(runtime.engine).entries() == []
    async with runtime.engine.connect() as conn:
        runs = (await conn.execute(select(Job.status).where(Job.kind == EXTRACT_KIND))).all()
    assert [r.status for r in runs] == ["done"]


async def test_a_members_manners_wait_in_a_group_and_are_kept_at_once_in_a_private_chat(
    runtime: Runtime, model_server: FakeModelServer
) -> None:
    manners = remember(0, "回复要短一点", about=None, kind="behavior")

    def script(mid: int) -> None:
        answer = json.loads(manners.tool_calls[0].arguments) | {"message_id": mid}
        spec = ToolCallSpec("memory__remember", json.dumps(answer, ensure_ascii=False))
        model_server.script(MODEL, Reply("", (spec,)))

    model_server.script(MODEL, call("reply", text="好"))
    await at_bot(runtime, "你话太多了，回复短一点", then=script)
    await until_async(lambda: _job_idle(runtime))
    store = MemoryStore(runtime.engine)
    assert await store.entries() == []  # only heard: a second member has not said it
    [heard] = await store.entries(status=MemoryStatus.HEARD)
    # Scripted before the line is said: the extraction may run as soon as the turn ends.
    inferred = {"about_user_id": None, "kind": "behavior", "text": "回复要短一点"}
    spec = ToolCallSpec("memory__remember", json.dumps(inferred, ensure_ascii=False))
    model_server.script(MODEL, call("reply", text="好"), Reply("", (spec,)))
    await say(runtime, message("回复短一点吧", stream=private(MING), user_id=MING))
    await extracted(runtime, 1)
    [kept] = await store.entries()
    assert kept.id != heard.id and kept.status is MemoryStatus.ACTIVE


async def test_nothing_promising_costs_no_model_call(
    runtime: Runtime, model_server: FakeModelServer
) -> None:
    model_server.script(MODEL, call("reply", text="早"))
    await at_bot(runtime, "早上好")
    await until_async(lambda: _job_idle(runtime))
    assert len(model_server.requests_for(MODEL)) == 1  # the turn's call only


async def test_taught_manners_go_to_behaviour_and_guide_later_turns(
    runtime: Runtime, model_server: FakeModelServer
) -> None:
    model_server.script(MODEL, call("reply", text="哦"))
    await at_bot(
        runtime,
        "你话太多了，回复短一点",
        then=lambda mid: model_server.script(
            MODEL, remember(mid, "回复要短一点", about=None, kind="behavior")
        ),
        role="admin",  # a plain member's manners for the group wait for a second member
    )
    await extracted(runtime, 1)
    [entry] = await MemoryStore(runtime.engine).entries()
    assert (entry.kind.value, entry.person_id) == ("behavior", None)
    model_server.script(MODEL, call("reply", text="好"))
    await at_bot(runtime, "今天吃啥")
    shown = last_prompt(model_server).split("【聊天记录】")[0]
    assert "这个群希望你" in shown and "回复要短一点" in shown
    assert "关于群：回复要短一点" not in shown  # guidance, not a fact
