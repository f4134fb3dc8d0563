"""Learning a group's terms on a real store through memory's real extraction job against the
scripted model server: the run that rides along, what the call shows, what is kept and what
is refused (a term never used, a vulgar meaning, a member's name), two groups apart, an
admin's meaning never overwritten, a deleted term never offered again, and samples kept."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.memory.config import MemoryConfig
from pallas.product.memory.extraction import ExtractionDeps, run_extraction
from pallas.product.memory.store import MemoryStore
from pallas.product.slang.config import SlangConfig, SlangSwitches
from pallas.product.slang.learning import SlangLearnTool, message_ids
from pallas.product.slang.noticing import Sighting
from pallas.product.slang.store import MAX_CANDIDATES, SlangStore
from pallas.product.slang.tables import SlangTerm
from pallas.providers.catalog import ModelType
from pallas.store.jobs import ClaimedJob
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.providers.support import catalog, harness, model
from tests.support.fake_llm import FakeModelServer, Reply, Status, ToolCallSpec
from tests.support.inbound import group, message, private, recall

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
UPSTREAM = "up-chat"
CAT_LINES = (("1", "嗯哼酱又把杯子推下去了"), ("2", "哈哈哈嗯哼酱是不是又胖了"),
             ("3", "嗯哼酱最近吃得好多"), ("1", "看到嗯哼醬了吗"))  # fmt: skip


@dataclass
class Kit:
    engine: AsyncEngine
    writer: TimelineWriter
    slang: SlangStore
    server: FakeModelServer
    deps: ExtractionDeps
    switches: SlangSwitches
    jobs: int = 0

    async def say(self, text: str, user_id: str, chat: str = "x", **kw: Any) -> MessageWritten:
        said = message(text, stream=group(chat), user_id=user_id, nickname=f"u{user_id}", **kw)
        written = await self.writer.write(said)
        assert isinstance(written, MessageWritten)
        return written

    async def run(self, stream_id: int) -> None:
        self.jobs += 1
        job = ClaimedJob(self.jobs, "memory.extract", {"stream_id": stream_id}, None, 1, 5, NOW)
        await run_extraction(job, self.deps)

    def script(self, *calls: tuple[str, dict[str, Any]]) -> None:
        specs = tuple(ToolCallSpec(n, json.dumps(a, ensure_ascii=False)) for n, a in calls)
        self.server.script(UPSTREAM, Reply("", specs))

    def calls(self) -> int:
        return len(self.server.requests_for(UPSTREAM))

    def last_payload(self) -> dict[str, Any]:
        body = self.server.requests_for(UPSTREAM)[-1].body
        return json.loads(body["messages"][-1]["content"])


@pytest.fixture
async def kit(engine: AsyncEngine, writer: TimelineWriter, model_server: FakeModelServer) -> Kit:
    slang = SlangStore(engine)
    switches = SlangSwitches()
    tool = SlangLearnTool(engine, slang, SlangConfig(), lambda _scope: _now(switches))
    models = harness(catalog(model_server, [model("chat", ModelType.CHAT)])).manager
    deps = ExtractionDeps(
        engine, MemoryStore(engine), models, lambda: MemoryConfig(extraction_messages=50),
        lambda: NOW, tools=lambda: (tool,),
    )  # fmt: skip
    return Kit(engine, writer, slang, model_server, deps, switches)


async def _now(switches: SlangSwitches) -> SlangSwitches:
    return switches


async def test_a_ripe_term_rides_the_extraction_and_only_a_used_clean_meaning_is_kept(
    kit: Kit,
) -> None:
    said = [await kit.say(text, user) for user, text in CAT_LINES]
    stream = said[0].stream_id
    ids = [s.message_id for s in said]
    kit.script(
        ("slang__learn", {"term": "嗯哼酱", "meaning": "群主家的猫", "examples": ids[:2]}),
        ("slang__learn", {"term": "火星文", "meaning": "看不懂的字"}),  # never used
        ("slang__learn", {"term": "u1", "meaning": "一个人"}),  # a member's name
        ("slang__learn", {"term": "嗯哼酱", "meaning": "傻逼", "examples": "1,2"}),  # vulgar
    )
    await kit.run(stream)
    assert kit.calls() == 1  # memory had nothing to ask: the ripe term made the call
    payload = kit.last_payload()
    assert payload["slang_candidates"] == [{"term": "嗯哼酱", "用到它的消息": ids}]
    assert [m["message_id"] for m in payload["messages"]] == ids
    [term] = [t for t in await kit.slang.terms(stream) if t.term == "嗯哼酱"]
    learned = (term.meaning, term.source, term.learned_from)
    assert learned == ("群主家的猫", "learned", tuple(ids[:2]))
    assert (term.lines, term.members, term.offers) == (4, 3, 1)
    assert 0 < term.confidence <= 1
    assert await kit.slang.meanings(stream) == {"嗯哼酱": "群主家的猫"}

    # Nothing new and nothing ripe: the next run makes no call at all.
    await kit.say("今天天气不错", "4")
    await kit.run(stream)
    assert kit.calls() == 1


async def test_two_groups_keep_their_own_meaning_and_an_admins_word_stands(kit: Kit) -> None:
    cats = [await kit.say(text, user, "cats") for user, text in CAT_LINES]
    games = [await kit.say(text, user, "games") for user, text in (
        ("5", "嗯哼酱又在打排位"), ("6", "嗯哼酱今晚上线吗"), ("7", "嗯哼酱带我上分"))]  # fmt: skip
    for said, meaning in ((cats, "群主家的猫"), (games, "群里打游戏最厉害的人的外号")):
        kit.script(("slang__learn", {"term": "嗯哼酱", "meaning": meaning}))
        await kit.run(said[0].stream_id)
    assert await kit.slang.meanings(cats[0].stream_id) == {"嗯哼酱": "群主家的猫"}
    assert await kit.slang.meanings(games[0].stream_id) == {"嗯哼酱": "群里打游戏最厉害的人的外号"}

    # An admin corrects; the model's later learning never overwrites it.
    await kit.slang.set_meaning(cats[0].stream_id, "嗯哼酱", "群主家的橘猫", "qq:1", NOW)
    assert not await kit.slang.learn(cats[0].stream_id, "嗯哼酱", "别的", [], "x", 0.5, NOW)
    assert await kit.slang.meanings(cats[0].stream_id) == {"嗯哼酱": "群主家的橘猫"}

    # Deleted: no meaning shown, and however much it is said, never offered again.
    assert await kit.slang.delete(games[0].stream_id, "嗯哼酱", "console")
    assert await kit.slang.meanings(games[0].stream_id) == {}
    calls = kit.calls()
    for n in range(6):
        await kit.say(f"嗯哼酱第{n}次上线", str(8 + n % 3), "games")
    await kit.run(games[0].stream_id)
    assert kit.calls() == calls


async def test_samples_are_kept_weighed_and_switched_off_per_group(kit: Kit) -> None:
    asked = await kit.say("晚饭吃什么", "1", "food", platform_message_id="f1")
    await kit.say("火锅！", "2", "food", reply_to="f1", platform_message_id="f2")
    await kit.say("好耶", "3", "food", reply_to="p-unknown")  # quotes a line not shown
    await kit.run(asked.stream_id)
    [kept] = await kit.slang.samples(asked.stream_id)
    assert (kept.text, kept.cue, kept.weight) == ("火锅！", "晚饭吃什么", 1.0)
    await kit.say("哈哈真的", "1", "food", reply_to="f2")
    await kit.run(asked.stream_id)
    [heavier, *_] = await kit.slang.samples(asked.stream_id)
    assert (heavier.text, heavier.weight) == ("火锅！", 2.0)

    kit.switches = SlangSwitches(learn=False, samples=False)
    kit.deps.tools = lambda: (SlangLearnTool(kit.engine, kit.slang, SlangConfig(),
                                             lambda _s: _now(kit.switches)),)  # fmt: skip
    before = len(await kit.slang.samples(asked.stream_id))
    await kit.say("吃饱了吗", "2", "food", platform_message_id="f3")
    await kit.say("饱了", "3", "food", reply_to="f3")
    await kit.run(asked.stream_id)
    assert len(await kit.slang.samples(asked.stream_id)) == before


async def test_a_failed_call_counts_nothing_twice_and_offers_again(kit: Kit) -> None:
    said = [await kit.say(text, user, "retry") for user, text in CAT_LINES]
    stream = said[0].stream_id
    kit.server.script(UPSTREAM, Status(500), Status(500), Status(500), Status(500))
    with pytest.raises(Exception):  # noqa: B017  the job fails; the worker retries it
        await kit.run(stream)
    kit.server.reset()  # the error answers the manager's own retries did not take
    [term] = await kit.slang.terms(stream)
    assert (term.lines, term.offers) == (4, 0)  # counted once, and never seen by a model
    kit.script(("slang__learn", {"term": "嗯哼酱", "meaning": "群主家的猫", "examples": 5}))
    await kit.run(stream)  # the retry reads the same lines
    [term] = await kit.slang.terms(stream)
    assert (term.lines, term.offers, term.meaning) == (4, 1, "群主家的猫")
    assert term.learned_from == tuple(s.message_id for s in said)  # a bad `examples`: all


async def test_only_an_offered_term_is_learned_from_standing_lines(kit: Kit) -> None:
    said = [await kit.say(text, user, "strict", platform_message_id=f"s{n}")
            for n, (user, text) in enumerate(CAT_LINES)]  # fmt: skip
    stream = said[0].stream_id
    await kit.writer.write(recall("s1", stream=group("strict")))
    kit.script(
        ("slang__learn", {"term": "嗯哼酱", "meaning": "猫", "examples": [True, "abc", {}]}),
        ("slang__learn", {"term": "杯子", "meaning": "喝水用的"}),  # used, never offered
    )
    await kit.run(stream)
    payload = kit.last_payload()
    shown = [m["message_id"] for m in payload["messages"]]
    assert said[1].message_id not in shown  # a recalled line is not shown
    assert payload["slang_candidates"][0]["用到它的消息"] == shown
    assert await kit.slang.meanings(stream) == {"嗯哼酱": "猫"}


async def test_a_private_chat_notices_no_terms(kit: Kit) -> None:
    stream = None
    for user, text in CAT_LINES:
        written = await kit.writer.write(message(text, stream=private("77"), user_id=user))
        assert isinstance(written, MessageWritten)
        stream = written.stream_id
    assert stream is not None
    await kit.run(stream)
    assert await kit.slang.terms(stream) == [] and kit.calls() == 0


async def test_terms_given_up_on_make_room_and_the_cursor_never_goes_back(kit: Kit) -> None:
    said = await kit.say("开个头", "1", "full")
    stream = said.stream_id
    many = [Sighting(f"词{n:03d}", (said.message_id,), frozenset({"1", "2"}), 9)
            for n in range(MAX_CANDIDATES)]  # fmt: skip
    await kit.slang.record(stream, many, said.message_id, NOW)
    async with kit.engine.begin() as conn:  # each offered twice and never learned
        await conn.execute(update(SlangTerm).values(offers=2))
    fresh = Sighting("嗯哼酱", (said.message_id,), frozenset({"3", "4"}), 2)
    await kit.slang.record(stream, [fresh], said.message_id - 1, NOW)  # a run that read less
    terms = {t.term for t in await kit.slang.terms(stream)}
    assert "嗯哼酱" in terms and len(terms) == MAX_CANDIDATES
    assert await kit.slang.cursor(stream) == said.message_id


def test_examples_are_read_safely() -> None:
    assert message_ids([1, "2", True, "²", "３", 3.0, None, {"a": 1}]) == {1, 2}
    assert message_ids("1,2") == set() and message_ids(None) == set()
