"""Context-assembly benchmark: `assemble_context` over a large timeline, and prompt size.

Part 1 builds a fresh temporary SQLite database migrated to head, fills it with many group
streams, a few thousand people (one identity each) and a large timeline of Chinese chat
messages interleaved across the streams (ids and timestamps increasing), then times
`assemble_context` call by call for turns on random streams: a batch of 1-3 consecutive
messages at a random point, the watermark the newest of them, and the trigger (hence the
timeline size, 8 or 4) from the kernel's own `classify_speak_trigger` / `timeline_size`.
Streams, people and identities go in through SQLAlchemy Core; the message rows through
sqlite3 `executemany` on the migrated file with the encodings SQLAlchemy uses (checked:
every assembled batch line must read back with its text, time and speaker), with
`PRAGMA synchronous=OFF` during the build only. After building, `gc.collect(); gc.freeze()`
as the bot does at start-up. Target: p99 < 4 ms per call. Then, over the same turns, its two
reads alone (`window_up_to`, `stream_info`).

Part 2 renders what the agent would send for a typical group turn (8 lines of history, one
of them the bot's, and a one-message batch that names the bot) and estimates its prompt
tokens with the project's estimator (`pallas.providers.estimate.estimate_tokens`, which errs
high) over the JSON of the messages plus the tool schemas: the single call and the split
mode's decision call, each with the native and the text protocol, and the split mode's reply
call; tiktoken's count too when it is installed.

Run from the repository root: `.venv/bin/python bench/context_bench.py [--messages 1000000]
[--streams 200] [--turns 2000] [--people 5000] [--loop uvloop|asyncio]`. Exits 1 if an
assembled turn lacks its batch or shows the wrong window or text; the speed target only
prints PASS or MISS.
"""

from __future__ import annotations

import argparse
import bisect
import gc
import json
import math
import random
import sqlite3
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from loguru import logger  # noqa: E402
from sqlalchemy import insert  # noqa: E402
from sqlalchemy.ext.asyncio import AsyncEngine  # noqa: E402

from bench.loops import add_loop_option, pick_runner  # noqa: E402
from bench.machine import machine_line  # noqa: E402
from pallas.core.actions import Capability  # noqa: E402
from pallas.core.inbound import (  # noqa: E402
    InboundMessage,
    Segment,
    SegmentKind,
    Sender,
    StreamKey,
    StreamKind,
)
from pallas.product.conversation.gate.facts import MessageFacts  # noqa: E402
from pallas.product.conversation.gate.gate import Disposition, Outcome, Reason, Signal  # noqa: E402
from pallas.product.conversation.gate.trigger import classify_speak_trigger, timeline_size  # noqa: E402
from pallas.product.conversation.ingress import StoredMessage  # noqa: E402
from pallas.product.conversation.turns.turn import Turn  # noqa: E402
from pallas.product.llm.agent.actions import DecisionFrame  # noqa: E402
from pallas.product.llm.agent.config import AgentConfig  # noqa: E402
from pallas.product.llm.agent.handler import build_frame  # noqa: E402
from pallas.product.llm.agent.text_protocol import describe_functions  # noqa: E402
from pallas.product.llm.agent.tool_specs import text_functions, tool_schemas  # noqa: E402
from pallas.product.llm.assembler.context import (  # noqa: E402
    AssemblyDeps,
    Character,
    PreparedTurn,
    assemble_context,
)
from pallas.product.llm.assembler.prompt import (  # noqa: E402
    Protocol,
    ProtocolMode,
    render_decision,
    render_reply_request,
)
from pallas.providers.estimate import estimate_tokens  # noqa: E402
from pallas.store.conversation import stream_info, window_up_to  # noqa: E402
from pallas.store.engine import create_engine  # noqa: E402
from pallas.store.migrate import upgrade_to_head  # noqa: E402
from pallas.store.models import Identity, Person, Stream  # noqa: E402

# About twice the recorded p99 (1.7-2.1 ms): the old identity subquery (p99 5-6 ms) or a
# window that stops using its index would cross it.
P99_TARGET_MS = 4.0
SEED = 11
BOT_ID = "10000"
BOT_PERSON = 1  # person and identity ids of the bot; people are 2..people+1
NICKNAMES = ("牛牛",)
NAPCAT = frozenset({Capability.POKE, Capability.REACT})  # what the NapCat outlet reports
T0 = datetime(2025, 1, 1, tzinfo=UTC)
MEAN_GAP_US = 30_000_000  # ~1M messages over a year
TEXT_POOL = 50_000
CHUNK = 100_000  # message rows per build transaction
WARMUP = 200
SQL_TIME = "%Y-%m-%d %H:%M:%S.%f"  # how SQLAlchemy stores a DateTime on SQLite
FROM_BOT, RECALLED = 1, 2  # message flags

_FRAGMENTS = (
    "今天吃什么/有人在吗/哈哈哈哈哈/笑死我了/这个怎么弄啊/我也是这么想的/晚上打游戏吗/"
    "刚下班，累死了/明天要下雨/周末去哪玩/这波操作可以/有没有人知道这个软件怎么装/"
    "我觉得不太行/你们看新闻了吗/在路上了/等我五分钟/好家伙/真的假的/太离谱了吧/"
    "谁有这个资源/已经买了/价格还行/排队排了一个小时/老板又加班/这首歌好听/推荐一下/"
    "我去看看/别说了，说多了都是泪/可以可以/明天见/早上好/晚安/这个bug修了吗/"
    "服务器又崩了/我刚看到/有点意思/不会吧/你说得对/下次一定/群里有人用过这个吗/"
    "猫又把杯子打翻了/奶茶喝多了睡不着/地铁上好挤/考试终于结束了/这题我不会/截图看看/"
    "发错群了/来个人带带我/这游戏更新了/周五团建去吃火锅/天气预报说降温/快递还没到/"
    "手机又卡了/我先撤了/明天几点集合/有空再说吧/ok没问题/3点开会别忘了"
)
FRAGMENTS = tuple(_FRAGMENTS.split("/"))
PUNCTUATION = ("，", "。", "！", "？", "", " ", "～", "…")
SURNAMES = "小老阿大二胖瘦王李张刘陈杨赵黄周吴"
GIVEN = "明红刚丽强芳军敏杰静涛燕超霞鹏娟飞云龙凤猫狗鱼鸟熊兔风月星辰"
LATIN = ("Kevin", "momo", "Tom", "阿Q", "zz", "Lucky", "nana", "AK", "Leo", "xx")
GROUP_TOPICS = ("摄影", "开黑", "考研", "租房", "跑步", "追剧", "二手", "动漫", "码农", "宠物")
GROUP_KINDS = ("交流群", "小分队", "吹水群", "互助群", "大本营", "基地")

# The typical turn of part 2: (speaker: index into the stream's first members, -1 the bot).
TYPICAL = (
    (0, "有人周末去爬山吗"),
    (1, "哪座山？远的话我就不去了"),
    (2, "香山吧，地铁能到，人可能有点多"),
    (-1, "香山这季节叶子还没红吧"),
    (0, "没红也行，主要是想出去走走，天天在家躺着快发霉了"),
    (3, "我去！几点集合？"),
    (1, "早上八点？太早我起不来"),
    (2, "九点半西苑地铁站吧，不行就十点"),
    (0, "牛牛你去不去？去的话给你带个煎饼"),
)

# The trigger mix of part 1: (label, weight, the batch gate's decision, opens with a name).
AT_ME = Disposition(Outcome.FORCE, Reason.MENTIONED, frozenset({Signal.MENTIONED}))
NAMED = Disposition(Outcome.DELIBERATE, Reason.ATTENTION, frozenset({Signal.CALLED_BY_NAME}))
AMBIENT = Disposition(Outcome.DELIBERATE, Reason.AMBIENT)
TRIGGERS = (
    ("@ (to_me, 8)", 40, AT_ME, False),
    ("name first (alias, 8)", 15, NAMED, True),
    ("name inside (mention, 8)", 15, NAMED, False),
    ("ambient (4)", 30, AMBIENT, False),
)


# Statistics -----------------------------------------------------------------------------------


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted sequence; NaN when empty."""
    if not ordered:
        return math.nan
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def timing_row(label: str, ms: Sequence[float]) -> str:
    return (
        f"  {label:34}{len(ms):>7}{percentile(ms, 50):>9.3f}{percentile(ms, 99):>9.3f}"
        f"{(ms[-1] if ms else math.nan):>9.3f}"
    )


# The timeline ---------------------------------------------------------------------------------


@dataclass
class PersonRow:
    person_id: int
    user_id: str
    nickname: str


@dataclass
class Timeline:
    """Everything generated, kept to build turns and to check what assembly returns."""

    streams: list[StreamKey]  # stream id - 1 -> key
    group_names: list[str]
    people: list[PersonRow]  # person id - 1 -> row (the bot first)
    members: list[list[int]]  # stream index -> person ids, most talkative first
    texts: list[str]  # the text pool
    by_stream: list[array[int]] = field(default_factory=list)  # stream index -> message ids
    stream_of: array[int] = field(default_factory=lambda: array("i"))  # by message id - 1
    sender: array[int] = field(default_factory=lambda: array("i"))
    text_idx: array[int] = field(default_factory=lambda: array("i"))
    micros: array[int] = field(default_factory=lambda: array("q"))  # since T0
    reply: array[int] = field(default_factory=lambda: array("i"))  # quoted id, 0 for none
    flags: bytearray = field(default_factory=bytearray)

    def time(self, message_id: int) -> datetime:
        return T0 + timedelta(microseconds=self.micros[message_id - 1])

    def text(self, message_id: int) -> str:
        return self.texts[self.text_idx[message_id - 1]]


def platform_id(message_id: int) -> str:
    return str(1_500_000_000 + message_id)


def make_text(rng: random.Random, length: int) -> str:
    parts: list[str] = []
    size = 0
    while size < length:
        piece = rng.choice(FRAGMENTS) + rng.choice(PUNCTUATION)
        parts.append(piece)
        size += len(piece)
    return "".join(parts)[:length].rstrip() or "嗯嗯嗯嗯嗯"


def text_length(rng: random.Random) -> int:
    """Mostly short chat lines (median ~15 chars), a tail of long ones, 5..120."""
    if rng.random() < 0.03:
        return rng.randint(60, 120)
    return max(5, min(120, round(rng.lognormvariate(2.7, 0.6))))


def make_people(rng: random.Random, count: int) -> list[PersonRow]:
    user_ids = rng.sample(range(10_000_000, 3_000_000_000), count)
    people = [PersonRow(BOT_PERSON, BOT_ID, NICKNAMES[0])]
    for k, user_id in enumerate(user_ids):
        if rng.random() < 0.15:
            name = rng.choice(LATIN) + str(rng.randint(1, 99))
        else:
            name = rng.choice(SURNAMES) + "".join(rng.choices(GIVEN, k=rng.randint(1, 2)))
        people.append(PersonRow(k + 2, str(user_id), name))
    return people


def new_timeline(rng: random.Random, streams: int, people: int) -> Timeline:
    keys = [
        StreamKey("qq", BOT_ID, StreamKind.GROUP, str(600_000_000 + 7_919 * s))
        for s in range(streams)
    ]
    names = [f"{rng.choice(GROUP_TOPICS)}{rng.choice(GROUP_KINDS)}{s + 1}" for s in range(streams)]
    rows = make_people(rng, people)
    humans = [p.person_id for p in rows[1:]]
    members = [rng.sample(humans, min(len(humans), rng.randint(20, 200))) for _ in keys]
    texts = [make_text(rng, text_length(rng)) for _ in range(TEXT_POOL)]
    texts += [text for _, text in TYPICAL]
    return Timeline(keys, names, rows, members, texts, by_stream=[array("i") for _ in keys])


def generate(rng: random.Random, messages: int, streams: int, people: int) -> Timeline:
    """Who said what where and when; the last messages are part 2's typical turn."""
    tl = new_timeline(rng, streams, people)
    stream_cum = list(_cumulative([1 / (r + 1) ** 0.8 for r in range(streams)]))
    member_cum = [list(_cumulative([1 / (r + 1) for r in range(len(m))])) for m in tl.members]
    scripted_from = messages - len(TYPICAL)
    micros = 0
    for i in range(messages):
        message_id = i + 1
        micros += 1 + int(rng.expovariate(1.0) * MEAN_GAP_US)
        if i >= scripted_from:
            s, sender, text_idx, flags = _scripted(tl, i - scripted_from)
        else:
            s = bisect.bisect(stream_cum, rng.random() * stream_cum[-1])
            flags = FROM_BOT if rng.random() < 0.03 else 0
            flags |= RECALLED if rng.random() < 0.005 else 0
            if flags & FROM_BOT:
                sender = BOT_PERSON
            else:
                cum = member_cum[s]
                sender = tl.members[s][bisect.bisect(cum, rng.random() * cum[-1])]
            text_idx = rng.randrange(TEXT_POOL)
        ids = tl.by_stream[s]
        quoted = 0
        if ids and i < scripted_from and rng.random() < 0.04:
            quoted = ids[-rng.randint(1, min(10, len(ids)))]
        ids.append(message_id)
        tl.stream_of.append(s)
        tl.sender.append(sender)
        tl.text_idx.append(text_idx)
        tl.micros.append(micros)
        tl.reply.append(quoted)
        tl.flags.append(flags)
    return tl


def _cumulative(weights: Sequence[float]) -> Iterator[float]:
    total = 0.0
    for w in weights:
        total += w
        yield total


def _scripted(tl: Timeline, k: int) -> tuple[int, int, int, int]:
    who, _ = TYPICAL[k]
    sender = BOT_PERSON if who < 0 else tl.members[0][who]
    return 0, sender, TEXT_POOL + k, FROM_BOT if who < 0 else 0


# Building the database ------------------------------------------------------------------------


async def insert_small_tables(engine: AsyncEngine, tl: Timeline) -> None:
    """Streams, people and identities through SQLAlchemy Core, as the store writes them."""
    now = T0 - timedelta(days=1)
    streams = [
        {
            "id": s + 1,
            "platform": key.platform,
            "self_id": key.self_id,
            "kind": key.kind.value,
            "external_id": key.external_id,
            "name": tl.group_names[s],
            "created_at": now,
        }
        for s, key in enumerate(tl.streams)
    ]
    people = [{"id": p.person_id, "display_name": p.nickname, "created_at": now} for p in tl.people]
    identities = [
        {
            "id": p.person_id,
            "platform": "qq",
            "user_id": p.user_id,
            "person_id": p.person_id,
            "nickname": p.nickname,
            "created_at": now,
        }
        for p in tl.people
    ]
    async with engine.begin() as conn:
        await conn.execute(insert(Stream), streams)
        await conn.execute(insert(Person), people)
        await conn.execute(insert(Identity), identities)


MESSAGE_INSERT = (
    "INSERT INTO message (id, stream_id, sender_person_id, platform_message_id, time, "
    "stored_at, text, segments, reply_to, mentions, mentions_all, is_poke, from_bot, "
    "recalled, suppressed, truncated, turn_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '[]', 0, 0, ?, ?, 0, 0, NULL)"
)


def message_rows(
    tl: Timeline, segments: Sequence[str], start: int, stop: int
) -> list[tuple[Any, ...]]:
    """Rows for message ids start+1..stop."""
    rows = []
    for i in range(start, stop):
        message_id = i + 1
        when = (T0 + timedelta(microseconds=tl.micros[i])).strftime(SQL_TIME)
        quoted = tl.reply[i]
        rows.append(
            (
                message_id,
                tl.stream_of[i] + 1,
                tl.sender[i],
                platform_id(message_id),
                when,
                when,
                tl.texts[tl.text_idx[i]],
                segments[tl.text_idx[i]],
                platform_id(quoted) if quoted else None,
                tl.flags[i] & FROM_BOT,
                (tl.flags[i] & RECALLED) >> 1,
            )
        )
    return rows


def insert_messages(path: Path, tl: Timeline) -> tuple[float, float]:
    """Bulk insert in CHUNK-row transactions: (seconds encoding rows, seconds in sqlite3)."""
    total = len(tl.sender)
    conn = sqlite3.connect(path, isolation_level=None)
    encode = spent = 0.0
    try:
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA cache_size=-262144")  # 256 MiB, for the build only
        t0 = time.perf_counter()
        # JSON as SQLAlchemy's default serializer (json.dumps) writes it.
        segments = [json.dumps([Segment(SegmentKind.TEXT, text=t).to_json()]) for t in tl.texts]
        for start in range(0, total, CHUNK):
            rows = message_rows(tl, segments, start, min(total, start + CHUNK))
            t1 = time.perf_counter()
            encode += t1 - t0
            conn.execute("BEGIN")
            conn.executemany(MESSAGE_INSERT, rows)
            conn.execute("COMMIT")
            t0 = time.perf_counter()
            spent += t0 - t1
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        spent += time.perf_counter() - t0
    finally:
        conn.close()
    return encode, spent


@dataclass
class Built:
    tl: Timeline
    migrate_s: float
    generate_s: float  # the timeline in memory, and the small tables through SQLAlchemy
    encode_s: float  # message rows as SQLite stores them
    insert_s: float  # sqlite3 executemany + commits + the final checkpoint
    total_s: float
    db_bytes: int


async def build(engine: AsyncEngine, path: Path, args: argparse.Namespace) -> Built:
    t0 = time.perf_counter()
    await upgrade_to_head(engine)
    migrated = time.perf_counter()
    tl = generate(random.Random(SEED), args.messages, args.streams, args.people)
    await insert_small_tables(engine, tl)
    await engine.dispose()  # no pooled connection while sqlite3 writes the file
    generated = time.perf_counter()
    encode_s, insert_s = insert_messages(path, tl)
    total = time.perf_counter() - t0
    return Built(
        tl,
        migrated - t0,
        generated - migrated,
        encode_s,
        insert_s,
        total,
        path.stat().st_size,
    )


# Turns ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    turn: Turn
    label: str
    window: tuple[int, ...]  # the ids the window must show, oldest first


def stored(tl: Timeline, message_id: int) -> StoredMessage:
    s = tl.stream_of[message_id - 1]
    person = tl.people[tl.sender[message_id - 1] - 1]
    text = tl.text(message_id)
    quoted = tl.reply[message_id - 1]
    msg = InboundMessage(
        stream=tl.streams[s],
        sender=Sender(person.user_id, person.nickname),
        platform_message_id=platform_id(message_id),
        time=tl.time(message_id),
        segments=(Segment(SegmentKind.TEXT, text=text),),
        text=text,
        reply_to=platform_id(quoted) if quoted else None,
    )
    return StoredMessage(message_id, s + 1, person.person_id, msg)


def make_turn(
    tl: Timeline,
    turn_id: int,
    batch: Sequence[int],
    disposition: Disposition,
    opens_with_name: bool,
) -> Turn:
    """A turn as `runner.build_turn` makes one from a batch and the batch gate's decision."""
    messages = tuple(stored(tl, m) for m in batch)
    trigger = classify_speak_trigger(disposition, opens_with_name)
    facts = MessageFacts(
        mentioned_me=Signal.MENTIONED in disposition.signals,
        called_by_name=Signal.CALLED_BY_NAME in disposition.signals,
        opens_with_name=opens_with_name,
    )
    return Turn(
        turn_id=turn_id,
        stream_id=messages[0].stream_id,
        stream=messages[0].message.stream,
        messages=messages,
        text="\n".join(m.message.text for m in messages),
        facts=facts,
        disposition=disposition,
        trigger=trigger,
        timeline_size=timeline_size(trigger),
        may_wait=True,
        watermark=max(m.message_id for m in messages),
    )


def random_cases(tl: Timeline, rng: random.Random, count: int, first_turn: int) -> list[Case]:
    """Turns on random streams: 1-3 consecutive messages from people (no recalled one)."""
    cases: list[Case] = []
    eligible = [s for s, ids in enumerate(tl.by_stream) if len(ids) >= 3]
    while len(cases) < count:
        ids = tl.by_stream[rng.choice(eligible)]
        size = rng.randint(1, 3)
        end = rng.randrange(size - 1, len(ids))
        batch = ids[end - size + 1 : end + 1]
        if any(tl.flags[m - 1] for m in batch):
            continue
        label, _, disposition, opens = rng.choices(TRIGGERS, weights=[t[1] for t in TRIGGERS])[0]
        turn = make_turn(tl, first_turn + len(cases), batch, disposition, opens)
        start = max(0, end + 1 - size - turn.timeline_size)
        cases.append(Case(turn, label, tuple(ids[start : end + 1])))
    return cases


def check(prepared: PreparedTurn, case: Case, tl: Timeline) -> str | None:
    """What is wrong with an assembled turn, or None."""
    batch = tuple(m.message_id for m in case.turn.messages)
    shown = tuple(line.message_id for line in prepared.lines)
    if prepared.batch_ids != batch or tuple(line.message_id for line in prepared.batch) != batch:
        return f"batch {batch} not shown as the batch (lines {shown})"
    if shown != case.window[len(case.window) - len(shown) :]:
        return f"window {shown}, expected the tail of {case.window}"
    if len(shown) + prepared.dropped_lines != len(case.window):
        return f"{len(shown)} lines + {prepared.dropped_lines} dropped != {len(case.window)}"
    if prepared.scene.group_name != tl.group_names[case.turn.stream_id - 1]:
        return f"group name {prepared.scene.group_name!r}"
    for line in prepared.batch:
        person = tl.people[tl.sender[line.message_id - 1] - 1]
        expected = (tl.text(line.message_id), tl.time(line.message_id), person.nickname)
        if (line.text, line.time, line.speaker) != expected or line.user_id != person.user_id:
            return f"line {line.message_id} reads back as {line!r}, expected {expected}"
    return None


def wrong_turns(cases: Sequence[Case], prepared: Sequence[PreparedTurn], tl: Timeline) -> list[str]:
    bad = []
    for case, result in zip(cases, prepared, strict=True):
        if problem := check(result, case, tl):
            bad.append(f"turn {case.turn.turn_id}: {problem}")
    return bad


# Part 1: timing -------------------------------------------------------------------------------


@dataclass
class Timed:
    ms: list[float]  # sorted
    wall_s: float
    prepared: list[PreparedTurn]


async def time_assembly(cases: Sequence[Case], deps: AssemblyDeps) -> Timed:
    clock = time.perf_counter_ns
    samples = [0] * len(cases)
    prepared: list[PreparedTurn] = []
    started = time.perf_counter()
    for i, case in enumerate(cases):
        t0 = clock()
        result = await assemble_context(case.turn, deps)
        samples[i] = clock() - t0
        prepared.append(result)
    wall = time.perf_counter() - started
    return Timed(sorted(s / 1e6 for s in samples), wall, prepared)


async def time_each(cases: Sequence[Case], call: Callable[[Turn], Any]) -> list[float]:
    clock = time.perf_counter_ns
    samples = []
    for case in cases:
        t0 = clock()
        await call(case.turn)
        samples.append((clock() - t0) / 1e6)
    return sorted(samples)


async def breakdown(engine: AsyncEngine, cases: Sequence[Case]) -> list[tuple[str, list[float]]]:
    """The two reads of `assemble_context`, each timed alone over the same turns."""

    async def window(turn: Turn) -> Any:
        size = turn.timeline_size + len(turn.messages)
        return await window_up_to(engine, turn.stream_id, turn.watermark, size)

    async def info(turn: Turn) -> Any:
        return await stream_info(engine, turn.stream_id)

    return [
        ("  of which window_up_to alone", await time_each(cases, window)),
        ("  of which stream_info alone", await time_each(cases, info)),
    ]


def report_build(built: Built, args: argparse.Namespace) -> None:
    tl = built.tl
    sizes = sorted(len(ids) for ids in tl.by_stream)
    lengths = sorted(len(tl.texts[i]) for i in tl.text_idx[:200_000])
    print(
        f"\n-- timeline: {args.messages:,} messages over {args.streams} group streams, "
        f"{len(tl.people) - 1:,} people (one identity each) + the bot --"
    )
    print(
        f"  messages per stream min {sizes[0]:,} / median {sizes[len(sizes) // 2]:,} / "
        f"max {sizes[-1]:,}; text length p50 {percentile(lengths, 50):.0f} / "
        f"p99 {percentile(lengths, 99):.0f} / max {lengths[-1]} chars"
    )
    rate = args.messages / built.insert_s if built.insert_s else math.nan
    print(
        f"  build {built.total_s:.1f} s: migrate {built.migrate_s:.1f} s, generate (and the "
        f"small tables) {built.generate_s:.1f} s, encode rows {built.encode_s:.1f} s, "
        f"message inserts {built.insert_s:.1f} s ({rate:,.0f} rows/s; sqlite3 executemany, "
        f"{CHUNK:,} rows per transaction, synchronous=OFF); database "
        f"{built.db_bytes / 2**20:,.0f} MiB"
    )


def report_assembly(
    timed: Timed,
    parts: list[tuple[str, list[float]]],
    cases: Sequence[Case],
    bad: list[str],
) -> None:
    mix: dict[str, int] = {}
    for case in cases:
        mix[case.label] = mix.get(case.label, 0) + 1
    batches = [len(c.turn.messages) for c in cases]
    print(
        f"\n-- assemble_context: {len(cases)} turns on random streams (after {WARMUP} untimed), "
        f"batch of 1-3 (mean {sum(batches) / len(batches):.2f}), token budget 3000 --"
    )
    print("  triggers: " + ", ".join(f"{k} {v}" for k, v in mix.items()))
    print(f"  {'(ms)':34}{'calls':>7}{'p50':>9}{'p99':>9}{'max':>9}")
    print(timing_row("assemble_context", timed.ms))
    for label, ms in parts:
        print(timing_row(label, ms))
    lines = [len(p.lines) for p in timed.prepared]
    dropped = sum(p.dropped_lines for p in timed.prepared)
    print(
        f"  {len(timed.ms) / timed.wall_s:,.0f} calls/s (one call at a time); "
        f"{sum(lines) / len(lines):.1f} lines per turn, {dropped} dropped by the budget"
    )
    for problem in bad[:5]:
        print(f"  WRONG: {problem}")
    if len(bad) > 5:
        print(f"  WRONG: ... {len(bad) - 5} more")
    p99 = percentile(timed.ms, 99)
    print(
        f"  assemble_context p99 ms {p99:.3f}   target < {P99_TARGET_MS:.0f}     "
        f"{verdict(p99 < P99_TARGET_MS)}"
        + (f"   {len(bad)} turn(s) assembled WRONG" if bad else "")
    )


# Part 2: prompt tokens ------------------------------------------------------------------------


def typical_turn(tl: Timeline, turn_id: int) -> Case:
    """The scripted last messages of stream 1: 8 lines of history, then the bot is named."""
    ids = tl.by_stream[0]
    turn = make_turn(tl, turn_id, [ids[-1]], NAMED, opens_with_name=True)
    return Case(turn, "typical", tuple(ids[-len(TYPICAL) :]))


Variant = tuple[str, list[dict[str, Any]], list[dict[str, Any]]]


def text_protocol(names: list[str], frame: DecisionFrame) -> Protocol:
    functions, descriptions = text_functions(frame)
    return Protocol(ProtocolMode.TEXT, names, describe_functions(functions, descriptions))


def variants(prepared: PreparedTurn, frame: DecisionFrame) -> list[Variant]:
    """(label, messages, tools) as `agent.loop` sends them (names as its `_protocol` sorts)."""
    names = [action.value for action in sorted(frame.actions)]
    native = Protocol(ProtocolMode.NATIVE, names)
    text = text_protocol(names, frame)
    tools = tool_schemas(frame)
    reply = render_reply_request(prepared, "去，问煎饼是什么馅的", prepared.watermark)
    return [
        ("single call, native", render_decision(prepared, native), tools),
        (
            "split decision call, native",
            render_decision(prepared, native, decision_only=True),
            tools,
        ),
        ("single call, text", render_decision(prepared, text), []),
        ("split decision call, text", render_decision(prepared, text, decision_only=True), []),
        ("split reply call (chat model)", reply, []),
    ]


def as_json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def tiktoken_counter() -> tuple[str, Callable[[str], int] | None]:
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("o200k_base")
    except Exception as exc:  # not installed, or its vocabulary cannot be fetched offline
        return f"tiktoken unavailable ({type(exc).__name__})", None
    return "tiktoken o200k_base", lambda text: len(encoding.encode(text))


def report_tokens(prepared: PreparedTurn, frame: DecisionFrame) -> None:
    chars = [len(line.text) for line in prepared.lines]
    print(
        f"\n-- prompt size of a typical group turn: {len(prepared.lines) - 1} lines of history "
        f"(one the bot's) + a 1-message batch naming the bot, text {min(chars)}-{max(chars)} "
        f"chars (mean {sum(chars) / len(chars):.0f}); actions {', '.join(sorted(frame.actions))} --"
    )
    tk_label, tk = tiktoken_counter()
    print(
        "  tokens by the project's estimator (pallas.providers.estimate.estimate_tokens: "
        "ASCII 4 chars/token, other 1 char/token; errs high) over the JSON of messages + tools"
    )
    print(f"  {'':32}{'system':>8}{'user':>7}{'tools':>7}{'total':>7}{'chars':>7}  {tk_label}")
    for label, messages, tools in variants(prepared, frame):
        system, user = (estimate_tokens(as_json(m)) for m in messages)
        tool_tokens = estimate_tokens(as_json(tools)) if tools else 0
        whole = as_json(messages) + (as_json(tools) if tools else "")
        total = estimate_tokens(as_json(messages)) + tool_tokens
        exact = f"{tk(whole)}" if tk else "-"
        print(f"  {label:32}{system:>8}{user:>7}{tool_tokens:>7}{total:>7}{len(whole):>7}  {exact}")


# Entry ----------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, path: Path) -> int:
    engine = create_engine(f"sqlite+aiosqlite:///{path}")
    try:
        built = await build(engine, path, args)
        report_build(built, args)
        tl = built.tl
        rng = random.Random(SEED + 1)
        warm = random_cases(tl, rng, WARMUP, 1)
        cases = random_cases(tl, rng, args.turns, WARMUP + 1)
        config = AgentConfig()
        persona = Character(
            name=config.persona.name or NICKNAMES[0],
            description=config.persona.description,
            style=config.persona.style,
        )
        deps = AssemblyDeps(engine, persona, config.context_token_budget)
        gc.collect()
        gc.freeze()
        await time_assembly(warm, deps)
        timed = await time_assembly(cases, deps)
        bad = wrong_turns(cases, timed.prepared, tl)
        parts = await breakdown(engine, cases)
        report_assembly(timed, parts, cases, bad)

        typical = typical_turn(tl, WARMUP + args.turns + 1)
        prepared = await assemble_context(typical.turn, deps)
        if problem := check(prepared, typical, tl):
            bad.append(f"typical turn: {problem}")
            print(f"  WRONG: typical turn: {problem}")
        frame = build_frame(typical.turn, prepared, NAPCAT, config, (persona.name, *NICKNAMES))
        report_tokens(prepared, frame)
        return 1 if bad else 0
    finally:
        await engine.dispose()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="timeline size")
    parser.add_argument("--streams", type=int, default=200, help="group streams")
    parser.add_argument("--people", type=int, default=5_000, help="people, one identity each")
    parser.add_argument("--turns", type=int, default=2_000, help="timed assemble_context calls")
    add_loop_option(parser)
    args = parser.parse_args(argv)
    if min(args.streams, args.turns) < 1 or args.people < 4:
        parser.error("--streams and --turns must be positive, --people at least 4")
    if args.messages < 10 * args.streams:
        parser.error("--messages must be at least 10 per stream")
    return args


def main() -> None:
    args = parse_args()
    logger.remove()
    loop_name, runner = pick_runner(args.loop)
    print(machine_line("at start", loop_name))
    print("context-assembly benchmark  gc frozen after the build")
    with tempfile.TemporaryDirectory(prefix="pallas-context-bench-") as tmp:
        code = runner(run(args, Path(tmp) / "pallas.db"))
    print(f"\n{machine_line('at end', loop_name)}")
    sys.exit(code)


if __name__ == "__main__":
    main()
