"""The persona stage end to end on a real store: attacks raise rage per chat and lower
favorability per bot account, a silence and then the blacklist through the rage silence
policy, the owners' notice job, and the messages that are no attack at all."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKey
from pallas.product.conversation.commands import CommandCall
from pallas.product.conversation.ingress import CONTINUE, StageResult, StoredMessage, Verdict
from pallas.product.conversation.jobs.registry import Jobs
from pallas.product.conversation.silence import SilenceStage
from pallas.product.persona.commands import LiftCommand
from pallas.product.persona.config import RageConfig
from pallas.product.persona.notify import blacklist_notice
from pallas.product.persona.rage import DEFAULT_RAGE
from pallas.product.persona.store import PersonaStore
from pallas.product.persona.tables import RageState, RelationNote
from pallas.product.persona.watch import (
    NOTIFY_KIND,
    RAGE_REASON,
    PersonaWatch,
    RageSilence,
    WatchDeps,
)
from pallas.store.audit import EventKind
from pallas.store.jobs import ClaimedJob, JobStore
from pallas.store.ledger import LedgerWriter
from pallas.store.models import Event
from pallas.store.timeline import MessageWritten, TimelineWriter
from tests.support.inbound import BOT_ID, group, message, private

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OWNER = "1"
INSULT = "你是傻逼"
AT_BOT = (BOT_ID,)


@dataclass
class Kit:
    engine: AsyncEngine
    writer: TimelineWriter
    store: PersonaStore
    ledger: LedgerWriter
    jobs: Jobs
    watch: PersonaWatch
    silence: SilenceStage
    now: list[datetime]
    notified: list[dict[str, Any]] = field(default_factory=list)

    def clock(self) -> datetime:
        return self.now[0]

    def tick(self, delta: timedelta) -> None:
        self.now[0] += delta

    async def write(
        self,
        text: str,
        *,
        stream: StreamKey | None = None,
        user: str = "42",
        nickname: str = "小明",
        mentions: tuple[str, ...] = (),
        reply_to: str | None = None,
        from_bot: bool = False,
        platform_message_id: str | None = None,
    ) -> StoredMessage:
        inbound = message(
            text,
            stream=stream or group("500"),
            user_id=user,
            nickname=nickname,
            time=self.clock(),
            mentions=mentions,
            reply_to=reply_to,
            from_bot=from_bot,
            platform_message_id=platform_message_id,
        )
        written = await self.writer.write(inbound)
        assert isinstance(written, MessageWritten)
        return StoredMessage(written.message_id, written.stream_id, written.person_id, inbound)

    async def say(self, text: str, **kwargs: Any) -> StageResult:
        """What the pipeline makes of a message: the silence stage first, then this one."""
        stored = await self.write(text, **kwargs)
        silenced = await self.silence.on_message(stored)
        if silenced.verdict is not Verdict.CONTINUE:
            return silenced
        return await self.watch.on_message(stored)

    async def person(self, user: str = "42") -> int:
        return (await self.write("…", stream=group("999"), user=user)).sender_person_id

    async def rage_rows(self) -> int:
        async with self.engine.connect() as conn:
            return int(await conn.scalar(select(func.count()).select_from(RageState)) or 0)

    async def attacks(self) -> list[tuple[str, str]]:
        await self.ledger.flush()
        query = (
            select(Event.reason, Event.payload)
            .where(Event.kind == EventKind.ATTACK_NOTED.value)
            .order_by(Event.id)
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [(r.reason, r.payload["attack"]) for r in rows]

    async def run_jobs(self) -> None:
        """Hand what is due to the registered handler, as the worker would."""
        claimed = await self.jobs.store.claim(
            "test", self.clock(), lease=timedelta(minutes=1), limit=100
        )
        for job in claimed:
            assert job.kind == NOTIFY_KIND
            await self.record(job)
            await self.jobs.store.finish(job.id, "test", self.clock())

    async def record(self, job: ClaimedJob) -> None:
        self.notified.append(job.payload)


@pytest.fixture
async def kit(engine: AsyncEngine, writer: TimelineWriter) -> AsyncIterator[Kit]:
    ledger = LedgerWriter(engine)
    ledger.start()
    now = [T0]
    store = PersonaStore(engine)
    jobs = Jobs(JobStore(engine), lambda: now[0])
    deps = WatchDeps(
        engine=engine,
        store=store,
        ledger=ledger,
        jobs=jobs,
        owners=frozenset({OWNER}),
        names=("牛牛",),
        clock=lambda: now[0],
        rage=RageConfig,  # the defaults, read where they act
    )
    silence = SilenceStage([RageSilence(store)], lambda: now[0])
    kit = Kit(engine, writer, store, ledger, jobs, PersonaWatch(deps), silence, now)
    jobs.handle(NOTIFY_KIND, kit.record)
    yield kit
    await ledger.close()


SUPPRESSED = StageResult(Verdict.SUPPRESSED, RAGE_REASON)


async def test_two_insults_in_a_private_chat_silence_the_sender(kit: Kit) -> None:
    chat = private("42")
    assert await kit.say(INSULT, stream=chat) == CONTINUE  # angrier
    assert await kit.say(INSULT, stream=chat) == SUPPRESSED  # this one is ignored already
    who = await kit.write("…", stream=chat)
    assert await kit.store.ignored_because(who.stream_id, who.sender_person_id, kit.clock()) == (
        "rage"
    )
    # What they say next is ignored by the silence policy, whatever it is.
    kit.tick(DEFAULT_RAGE.silence - timedelta(seconds=1))
    assert await kit.say("好了好了，对不起", stream=chat) == StageResult(Verdict.SUPPRESSED, "rage")
    # A restart reads the same silence from the store.
    restarted = RageSilence(PersonaStore(kit.engine))
    assert await restarted.reason_to_silence(who, kit.clock()) == "rage"
    kit.tick(timedelta(seconds=1))
    assert await restarted.reason_to_silence(who, kit.clock()) is None
    assert await kit.say("我们和好吧", stream=chat) == CONTINUE
    assert await kit.attacks() == [("angrier", "insult"), ("silenced", "insult")]


async def test_a_second_silence_within_a_day_blacklists_and_tells_the_owners_once(
    kit: Kit,
) -> None:
    room = group("500")
    assert await kit.say(INSULT, mentions=AT_BOT) == CONTINUE
    assert await kit.say(INSULT, mentions=AT_BOT) == SUPPRESSED
    assert await kit.say(INSULT, mentions=AT_BOT) == SUPPRESSED  # by the silence policy
    kit.tick(DEFAULT_RAGE.silence + timedelta(minutes=1))  # the silence is over
    assert await kit.say(INSULT, mentions=AT_BOT) == CONTINUE
    await kit.run_jobs()
    assert kit.notified == []
    assert await kit.say(INSULT, mentions=AT_BOT) == SUPPRESSED  # silenced again: blacklisted

    who = await kit.write("…", stream=room)
    sid, pid = who.stream_id, who.sender_person_id
    assert await kit.store.ignored_because(sid, pid, kit.clock()) == "blacklisted"
    kit.tick(timedelta(days=3))
    assert await kit.say("早上好", stream=room) == StageResult(Verdict.SUPPRESSED, "blacklisted")
    assert await kit.say(INSULT, mentions=AT_BOT) == StageResult(Verdict.SUPPRESSED, "blacklisted")
    assert await PersonaStore(kit.engine).ignored_because(sid, pid, kit.clock()) == "blacklisted"

    await kit.run_jobs()
    assert kit.notified == [
        {
            "stream_id": sid,
            "platform": "qq",
            "self_id": BOT_ID,
            "group": "500",
            "user_id": "42",
            "name": "小明",
        }
    ]
    assert await kit.jobs.store.counts() == {"pending": 0, "running": 0, "done": 1, "failed": 0}
    assert await kit.attacks() == [
        ("angrier", "insult"),
        ("silenced", "insult"),
        ("angrier", "insult"),
        ("blacklisted", "insult"),
    ]
    # Four insults: favorability fell by 8 each.
    assert await kit.store.favorability(BOT_ID, pid) == (-32.0, "")


async def test_a_second_silence_after_a_day_only_silences(kit: Kit) -> None:
    for _ in range(2):
        assert await kit.say(INSULT, mentions=AT_BOT) == CONTINUE
        assert await kit.say(INSULT, mentions=AT_BOT) == SUPPRESSED
        kit.tick(DEFAULT_RAGE.escalate_within + timedelta(minutes=1))
    who = await kit.write("…")
    assert await kit.store.ignored_because(who.stream_id, who.sender_person_id, kit.clock()) is None
    await kit.run_jobs()
    assert kit.notified == []
    assert [reason for reason, _ in await kit.attacks()] == ["angrier", "silenced"] * 2


async def test_an_owner_never_attacks_and_nothing_is_stored(kit: Kit) -> None:
    for _ in range(5):
        assert await kit.say(INSULT, user=OWNER, stream=private(OWNER)) == CONTINUE
        assert await kit.say(INSULT, user=OWNER, mentions=AT_BOT) == CONTINUE
    assert await kit.rage_rows() == 0
    assert await kit.store.favorability(BOT_ID, await kit.person(OWNER)) == (0.0, "")
    assert await kit.attacks() == []


async def test_an_insult_in_a_group_not_aimed_at_the_bot_is_none_of_its_business(
    kit: Kit,
) -> None:
    await kit.write("你先骂的", user="43", platform_message_id="m-43")
    assert await kit.say(INSULT) == CONTINUE
    assert await kit.say(INSULT, mentions=("43",)) == CONTINUE  # @ someone else
    assert await kit.say(INSULT, reply_to="m-43") == CONTINUE  # a reply to someone else
    assert await kit.say(INSULT, reply_to="no-such-message") == CONTINUE
    assert await kit.say("他说「牛牛是傻逼」", mentions=AT_BOT) == CONTINUE  # quoted words
    assert await kit.rage_rows() == 0
    assert await kit.store.favorability(BOT_ID, await kit.person()) == (0.0, "")


@pytest.mark.parametrize(
    "how",
    [
        {"mentions": AT_BOT},
        {"text": "牛牛你是傻逼"},
        {"reply_to": "bot-1"},
    ],
    ids=["an @", "the bot's name", "a reply to the bot"],
)
async def test_an_insult_aimed_at_the_bot_in_a_group(kit: Kit, how: dict[str, Any]) -> None:
    await kit.write("嗯嗯", user=BOT_ID, from_bot=True, platform_message_id="bot-1")
    kwargs = {k: v for k, v in how.items() if k != "text"}
    text = how.get("text", INSULT)
    assert await kit.say(text, **kwargs) == CONTINUE
    assert await kit.say(text, **kwargs) == SUPPRESSED
    assert [reason for reason, _ in await kit.attacks()] == ["angrier", "silenced"]


async def test_a_close_friend_s_put_down_is_a_joke_and_an_insult_weighs_half(kit: Kit) -> None:
    pid = await kit.person()
    await kit.store.set_favorability(BOT_ID, pid, 80.0, "2026-11-30", T0)
    assert await kit.say("你真笨", mentions=AT_BOT) == CONTINUE
    assert await kit.rage_rows() == 0
    assert await kit.store.favorability(BOT_ID, pid) == (80.0, "2026-11-30")

    assert await kit.say(INSULT, mentions=AT_BOT) == CONTINUE
    who = await kit.write("…")
    row = await kit.store.rage(who.stream_id, pid)
    assert row is not None and row.pressure == pytest.approx(2.0)
    assert await kit.store.favorability(BOT_ID, pid) == (76.0, "2026-11-30")
    assert await kit.attacks() == [("angrier", "insult")]


async def test_a_put_down_from_anyone_else_counts(kit: Kit) -> None:
    assert await kit.say("你真笨", mentions=AT_BOT) == CONTINUE
    pid = await kit.person()
    assert await kit.store.favorability(BOT_ID, pid) == (-3.0, "")
    assert await kit.attacks() == [("angrier", "put_down")]


async def test_ten_groups_keep_their_own_rage_and_favorability_floors_at_minus_100(
    kit: Kit,
) -> None:
    rooms = [group(str(600 + i)) for i in range(10)]
    for room in rooms:
        assert await kit.say(INSULT, stream=room, mentions=AT_BOT) == CONTINUE  # new here
        assert await kit.say(INSULT, stream=room, mentions=AT_BOT) == SUPPRESSED
    pid = await kit.person()
    for room in rooms:
        who = await kit.write("…", stream=room)
        assert await kit.store.ignored_because(who.stream_id, pid, kit.clock()) == "rage"
        assert await kit.store.blacklisted(who.stream_id) == []
    # Twenty insults at -8 each: the floor, not -160.
    assert await kit.store.favorability(BOT_ID, pid) == (-100.0, "")
    assert await kit.store.scores(BOT_ID, [pid]) == {pid: -100.0}
    await kit.run_jobs()
    assert kit.notified == []  # one silence in each group: nobody blacklisted
    assert [reason for reason, _ in await kit.attacks()] == ["angrier", "silenced"] * 10


async def test_a_plain_statement_about_oneself_becomes_a_note(kit: Kit) -> None:
    assert await kit.say("以后叫我阿明") == CONTINUE
    assert await kit.say("以后叫我阿明") == CONTINUE  # kept once
    assert await kit.say("我是你爸爸", mentions=AT_BOT) == CONTINUE  # a taunt: no note
    pid = await kit.person()
    notes = await kit.store.notes(BOT_ID, [pid])
    assert [(n.text, n.source) for n in notes] == [("希望被叫作阿明", "observed")]
    async with kit.engine.connect() as conn:
        created = await conn.scalar(select(RelationNote.created_at))
    assert created == T0
    assert await kit.rage_rows() == 0


async def test_the_bot_s_own_messages_pokes_and_empty_words_are_skipped(kit: Kit) -> None:
    assert await kit.say(INSULT, user=BOT_ID, from_bot=True) == CONTINUE
    assert await kit.say("   ", mentions=AT_BOT) == CONTINUE
    assert await kit.rage_rows() == 0
    assert await kit.attacks() == []


async def test_an_insult_that_also_says_how_to_call_the_sender_leaves_no_note(kit: Kit) -> None:
    """Notes come only from messages that are no attack: "叫我爸爸" thrown at the bot together
    with an insult is a taunt, not how the sender wishes to be addressed."""
    assert await kit.say("以后叫我爸爸，傻逼", mentions=AT_BOT) == CONTINUE  # angrier
    assert [reason for reason, _ in await kit.attacks()] == ["angrier"]
    assert await kit.store.notes(BOT_ID, [await kit.person()]) == []


async def test_a_blacklisting_in_a_private_chat_can_be_forgiven_as_the_notice_says(
    kit: Kit,
) -> None:
    """The owners' notice ends with the command that forgives; it must work for a private
    chat too, the one place where every message is aimed at the bot."""
    chat = private("42")
    for _ in range(2):
        assert await kit.say(INSULT, stream=chat) == CONTINUE
        assert await kit.say(INSULT, stream=chat) == SUPPRESSED
        kit.tick(DEFAULT_RAGE.silence + timedelta(minutes=1))
    who = await kit.write("…", stream=chat)
    sid, pid = who.stream_id, who.sender_person_id
    assert await kit.store.ignored_because(sid, pid, kit.clock()) == "blacklisted"
    await kit.run_jobs()
    [payload] = kit.notified
    notice = blacklist_notice(payload)
    command = notice[notice.index("/解除拉黑") :]
    assert command == "/解除拉黑 私聊 42"

    asked = await kit.write(command, stream=private(OWNER), user=OWNER)
    lift = LiftCommand(kit.engine, kit.store, kit.clock)
    answer = await lift.run(CommandCall("解除拉黑", command.split(" ", 1)[1], asked))
    assert answer == "好，不生TA的气了。"
    assert await kit.store.ignored_because(sid, pid, kit.clock()) is None
