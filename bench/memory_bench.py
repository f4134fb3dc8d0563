"""Memory benchmark: recall latency and size of the memory store at 10,000 and 100,000 facts.

For each size in `--sizes`, a fresh database is migrated to head and filled with that many
facts spread like a real bot's: 50 groups (streams) of skewed popularity and 2,000 people, each
in one to three groups and of skewed talkativeness, their facts capped per person and chat at
the store's default `MemoryLimits` (100); 5 % are group entries (person_id None, capped at 300
per chat); 20 % of the people consented to their facts being used in every group. The texts
come from Chinese templates ("{名字}喜欢吃{食物}", "{名字}在{城市}工作", ...) over varied word
lists, so the bigram terms are distributed as in real facts; a person's facts in one chat are
never the same text twice. Every entry is active and has a random 256-dim float32 vector of
model "bench-embed". The rows are inserted in bulk with SQLAlchemy Core, straight into
`memory_entry`, `memory_term` and `memory_vector` (terms from `index_terms`, owner from
`owner_key`, exactly as `MemoryStore.remember` and `set_embedding` file them), a few thousand
entries per transaction: going through `remember` one by one (duplicate and cap checks, the
change log) would take far too long.

Then `--rounds` recalls (after a few untimed ones): a group, six present people with facts in
it, a short query (a two-character food name) and a ~30-character impression sentence.
"keyword" times `keyword_recall(engine, [q1, q2], scope, limit=8)`; "hybrid" times
`recall_entries` with the same queries and a query vector of "bench-embed" (keyword scores, the
visible vectors compared, one list). The query's embedding is a network call to the model
service and is not timed: a random vector stands in for it. Target: p99 <= 20 ms for both,
printed PASS or MISS. The query plans of one round's statements are printed under the figures.

Size: the database file after `PRAGMA wal_checkpoint(TRUNCATE)` and again after `VACUUM`, per
object from the `dbstat` virtual table when SQLite has it, per 10,000 facts; and `memory_term`
rows per fact. On PostgreSQL (after `ANALYZE`, as autovacuum would): the database and each
memory table with its indexes.

Backends: SQLite on a temporary file, always; PostgreSQL too with `--postgres URL` (a server
you started; a throwaway database is created in it per size and dropped).

Run from the repository root: `.venv/bin/python bench/memory_bench.py [--sizes 10000,100000]
[--rounds 500] [--postgres URL] [--loop uvloop|asyncio]`. Exits 0 unless something fails;
the targets only print.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from string import Formatter
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402
from sqlalchemy import event, insert, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402
from sqlalchemy.exc import DBAPIError  # noqa: E402
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine  # noqa: E402

from bench.logs import capture_warnings, print_logged  # noqa: E402
from bench.loops import add_loop_option, pick_runner  # noqa: E402
from bench.machine import machine_line  # noqa: E402
from bench.stats import fmt, percentile, verdict  # noqa: E402
from pallas.core.inbound import StreamKey, StreamKind  # noqa: E402
from pallas.core.terms import index_terms  # noqa: E402
from pallas.core.vectors import pack  # noqa: E402
from pallas.product.conversation.jobs.registry import Jobs  # noqa: E402
from pallas.product.conversation.turns.observers import (  # noqa: E402
    TurnEnded,
    TurnEnding,
    TurnObservers,
)
from pallas.product.memory.config import MemoryConfig  # noqa: E402
from pallas.product.memory.extraction import EXTRACT_KIND, MemoryObserver  # noqa: E402
from pallas.product.memory.recall_reads import (  # noqa: E402
    QueryVectors,
    RecallScope,
    keyword_recall,
    recall_entries,
)
from pallas.product.memory.store import MAX_TEXT_CHARS, MemoryKind, MemoryLimits, owner_key  # noqa: E402
from pallas.product.memory.tables import (  # noqa: E402
    MemoryConsent,
    MemoryEntry,
    MemoryTerm,
    MemoryVector,
)
from pallas.store.engine import create_engine  # noqa: E402
from pallas.store.jobs import JobStore  # noqa: E402
from pallas.store.migrate import upgrade_to_head  # noqa: E402
from pallas.store.models import Person, Stream  # noqa: E402

SEED = 11
GROUPS = 50
PEOPLE = 2_000
GROUP_SHARE = 0.05  # of the facts: group entries (person_id None)
CONSENT_SHARE = 0.2  # of the people
LIMITS = MemoryLimits()
MODEL = "bench-embed"
DIM = 256
BATCH = 5_000  # entries per transaction (with their ~10 term rows each)
PRESENT = 6
LIMIT = 8
WARMUP = 20
P99_TARGET_MS = 20.0
MAX_TRIES = 10  # for a text not yet known about that person in that chat
TEN_K = 10_000
MB = 1024 * 1024
MEMORY_TABLES = ("memory_entry", "memory_term", "memory_vector")

# Vocabulary ----------------------------------------------------------------------------------


def words(spaced: str) -> list[str]:
    return spaced.split()


SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何林高罗郑梁谢宋"
    "唐许韩冯邓曹彭曾肖田董袁潘蒋蔡余杜叶程苏魏吕丁任沈姚卢"
)
GIVEN = (
    "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚英华玉萍红"
    "玲芬燕彬鹏辉宇浩凯健俊帆晨阳琳雪婷欣悦然轩涵诺怡琪雨"
)
FOODS = words(
    "榴莲 火锅 烧烤 螺蛳粉 芒果 草莓 西瓜 香菜 臭豆腐 麻辣烫 "
    "寿司 拉面 饺子 包子 油条 煎饼 披萨 汉堡 炸鸡 薯条 牛排 "
    "蛋糕 冰淇淋 巧克力 酸奶 豆腐 茄子 土豆 番茄 黄瓜 苦瓜 "
    "韭菜 羊肉 牛肉 鸭血 肥肠 小龙虾 螃蟹 海鲜 米线 凉皮 "
    "肉夹馍 热干面 炒饭 粽子 月饼 汤圆 年糕 橘子 苹果 香蕉 "
    "葡萄 荔枝 菠萝 柠檬 樱桃 蓝莓 桃子 猕猴桃 哈密瓜 椰子 "
    "山竹 鸡蛋 面包 馄饨 烤鸭 酸菜鱼 水煮鱼 回锅肉 宫保鸡丁 "
    "麻婆豆腐 糖醋排骨 红烧肉 鱼香肉丝 煲仔饭 肠粉 烧卖 虾饺 蛋挞"
)
VOCAB: dict[str, list[str]] = {
    "food": FOODS,
    "city": words(
        "北京 上海 广州 深圳 杭州 成都 重庆 武汉 西安 南京 苏州 "
        "天津 长沙 郑州 青岛 厦门 大连 沈阳 哈尔滨 长春 济南 合肥 "
        "福州 南昌 昆明 贵阳 南宁 海口 三亚 兰州 西宁 银川 拉萨 "
        "乌鲁木齐 呼和浩特 太原 石家庄 无锡 宁波 温州 东莞 佛山 "
        "珠海 中山 惠州 汕头 泉州 洛阳 开封 桂林 丽江 大理 香港 "
        "澳门 台北 东京 大阪 首尔 新加坡 伦敦"
    ),
    "pet": words(
        "猫 狗 仓鼠 兔子 乌龟 金鱼 鹦鹉 柯基 柴犬 哈士奇 布偶猫 橘猫 英短 金毛 泰迪 龙猫 刺猬 边牧"
    ),
    "petname": words(
        "豆豆 球球 咪咪 旺财 小白 小黑 大黄 可乐 雪碧 布丁 芝麻 花卷 馒头 元宝 来福 团子"
    ),
    "day": list("一二三四五六日"),
    "ball": words("篮球 羽毛球 乒乓球 网球 排球 足球 台球 高尔夫 保龄球 壁球 棒球 冰球"),
    "activity": words("游泳 跑步 爬山 健身 骑车 滑冰 攀岩 瑜伽 跳舞 钓鱼 滑雪 拳击"),
    "game": words(
        "原神 王者荣耀 英雄联盟 和平精英 我的世界 明日方舟 阴阳师 "
        "崩坏星穹铁道 第五人格 光遇 蛋仔派对 永劫无间 艾尔登法环 "
        "塞尔达 动物森友会 宝可梦 守望先锋 绝地求生 炉石传说 三国杀 "
        "斗地主 麻将 象棋 围棋 魔兽世界 星露谷物语 Minecraft Apex "
        "Valorant CS2"
    ),
    "instrument": words("钢琴 吉他 小提琴 古筝 二胡 尤克里里 架子鼓 长笛 萨克斯 琵琶 贝斯 口琴"),
    "color": words("红色 蓝色 绿色 黄色 紫色 粉色 黑色 白色 灰色 橙色 青色 棕色"),
    "job": words(
        "程序员 老师 医生 护士 设计师 会计 律师 厨师 司机 销售 "
        "产品经理 公务员 警察 工程师 画师 摄影师 记者 编辑 主播 "
        "学生 研究生 博士生 外卖员 快递员 客服 翻译 建筑师 药剂师 "
        "运维 测试"
    ),
    "major": words(
        "计算机 数学 物理 化学 生物 英语 日语 法学 医学 金融 会计 "
        "新闻 历史 哲学 建筑 土木 机械 电子 自动化 心理学 美术 "
        "音乐 体育 经济 管理"
    ),
    "singer": [
        *words(
            "周杰伦 林俊杰 陈奕迅 邓紫棋 薛之谦 五月天 李荣浩 毛不易 "
            "华晨宇 王菲 张学友 蔡依林 孙燕姿 许嵩 汪苏泷 告五人 草东 "
            "YOASOBI BLACKPINK 米津玄师 Ado 初音未来 洛天依"
        ),
        "Taylor Swift",
    ],
    "drink": words(
        "咖啡 奶茶 绿茶 红茶 豆浆 牛奶 可乐 橙汁 柠檬水 乌龙茶 美式 拿铁 气泡水 椰汁 酸梅汤"
    ),
    "language": words("日语 韩语 英语 法语 德语 西班牙语 俄语 粤语 Python Rust Java Go"),
    "place": words(
        "图书馆 咖啡馆 健身房 电影院 商场 公园 网吧 漫展 livehouse 博物馆 游乐园 海边 夜市 书店 KTV"
    ),
    "fear": words(
        "蟑螂 蜘蛛 打雷 坐飞机 恐高 看牙医 打针 黑暗 蛇 老鼠 考试 开会 当众讲话 鬼片 坐过山车"
    ),
    "relative": words("哥哥 姐姐 弟弟 妹妹 表哥 表姐 堂弟 舅舅 姑姑 女朋友 男朋友 老婆 老公"),
    "phone": [
        "iPhone 15",
        "iPhone 13",
        "小米14",
        "华为Mate60",
        "荣耀90",
        "OPPO Find X7",
        "vivo X100",
        "一加12",
        "红米K70",
        "三星S24",
        "Pixel 8",
    ],
    "banned": words("广告 色图 政治话题 刷屏表情 二维码 红包链接 拼多多砍价"),
    "meme": words("绝绝子 yyds 破防了 栓Q 芭比Q了 遥遥领先 尊嘟假嘟 泰裤辣 显眼包 发疯文学"),
    "event": words("开黑 连麦唱歌 抽奖 看电影 玩狼人杀 打剧本杀"),
    "age": [str(n) for n in range(14, 46)],
    "month": [str(n) for n in range(1, 13)],
    "date": [str(n) for n in range(1, 29)],
}
PERSON_TEMPLATES = [
    "{n}喜欢吃{food}",
    "{n}不吃{food}，说是过敏",
    "{n}讨厌{food}的味道",
    "{n}在{city}工作",
    "{n}老家是{city}的",
    "{n}养了一只{pet}，叫{petname}",
    "{n}的{pet}最近生病了，很担心",
    "{n}每周{day}打{ball}",
    "{n}每周{day}去{activity}",
    "{n}说自己{ball}打得很烂",
    "{n}是{job}",
    "{n}以前是{job}，后来去了{city}",
    "{n}最近在玩{game}",
    "{n}{game}玩了好几年了",
    "{n}会弹{instrument}",
    "{n}最喜欢的颜色是{color}",
    "{n}的生日是{month}月{date}号",
    "{n}今年{age}岁",
    "{n}在{city}上大学，学的是{major}",
    "{n}喜欢听{singer}的歌",
    "{n}每天早上要喝{drink}",
    "{n}在学{language}",
    "{n}周末经常去{place}",
    "{n}最怕{fear}",
    "{n}有一个{relative}在{city}",
    "{n}用的手机是{phone}",
    "{n}打算{month}月去{city}旅游",
]
GROUP_TEMPLATES = [
    "群里每周{day}晚上一起打{game}",
    "本群禁止发{banned}",
    "每年{month}月群友会在{city}面基",
    "群里最近流行说{meme}",
    "群公告说每周{day}晚上八点{event}",
    "群主是{city}的{job}",
    "大家都叫群里的机器人{petname}",
    "群友们都爱吃{food}",
]
IMPRESSION_TEMPLATES = [
    "{n}说他最近在{city}加班特别累，周末想去打{ball}然后吃顿{food}放松一下",
    "感觉{n}今天心情不太好，可能是因为{pet}生病了，要不要一起去{place}散散心",
    "{n}刚才说想换个{phone}的手机，顺便问大家{game}的新版本好不好玩",
    "听说{n}下个月要去{city}旅游，大家有没有推荐的{food}店和好玩的{place}",
]
SHORT_FOODS = [f for f in FOODS if len(f) == 2]


def fields(template: str) -> list[str]:
    return [name for _, name, _, _ in Formatter().parse(template) if name and name != "n"]


def fill_template(template: str, name: str, rng: random.Random) -> str:
    picks = {key: rng.choice(VOCAB[key]) for key in fields(template)}
    return " ".join(template.format(n=name, **picks).split())[:MAX_TEXT_CHARS]


# The plan of a store ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    stream_id: int
    person_id: int | None
    text: str


@dataclass
class Plan:
    names: dict[int, str]  # person id -> display name
    facts: list[Fact]
    consenting: list[int]
    present: dict[int, list[int]] = field(default_factory=dict)  # stream -> people with facts

    def __post_init__(self) -> None:
        people: dict[int, set[int]] = defaultdict(set)
        for fact in self.facts:
            if fact.person_id is not None:
                people[fact.stream_id].add(fact.person_id)
        self.present = {s: sorted(p) for s, p in people.items()}


def make_names(rng: random.Random) -> dict[int, str]:
    names: set[str] = set()
    while len(names) < PEOPLE:
        given = "".join(rng.choices(GIVEN, k=rng.choice((1, 2, 2))))
        names.add(rng.choice(SURNAMES) + given)
    return dict(enumerate(sorted(names, key=lambda _: rng.random()), start=1))


def memberships(rng: random.Random) -> dict[int, list[int]]:
    """Each person in one to three groups; the first groups are the busiest."""
    weights = [1 / (g**0.7) for g in range(1, GROUPS + 1)]
    groups = list(range(1, GROUPS + 1))
    result = {}
    for person in range(1, PEOPLE + 1):
        count = 1 + (rng.random() < 0.35) + (rng.random() < 0.1)
        result[person] = sorted(set(rng.choices(groups, weights, k=count)))
    return result


def fresh_text(templates: list[str], name: str, known: set[str], rng: random.Random) -> str | None:
    for _ in range(MAX_TRIES):
        candidate = fill_template(rng.choice(templates), name, rng)
        if candidate not in known:
            return candidate
    return None


def person_facts(
    quota: int, names: dict[int, str], groups_of: dict[int, list[int]], rng: random.Random
) -> list[Fact]:
    capacity = sum(len(g) for g in groups_of.values()) * LIMITS.facts_per_person
    if quota > capacity * 0.8:
        raise ValueError(f"{quota} person facts do not fit under the caps ({capacity})")
    people = list(names)
    weights = [rng.lognormvariate(0, 1) for _ in people]  # some people say far more
    known: dict[tuple[int, int], set[str]] = defaultdict(set)
    facts: list[Fact] = []
    while len(facts) < quota:
        for person in rng.choices(people, weights, k=quota - len(facts)):
            stream = rng.choice(groups_of[person])
            texts = known[(stream, person)]
            if len(texts) >= LIMITS.facts_per_person:
                continue
            if (fact_text := fresh_text(PERSON_TEMPLATES, names[person], texts, rng)) is not None:
                texts.add(fact_text)
                facts.append(Fact(stream, person, fact_text))
    return facts


def group_facts(quota: int, rng: random.Random) -> list[Fact]:
    if quota > GROUPS * LIMITS.group_facts * 0.8:
        raise ValueError(f"{quota} group entries do not fit under the caps")
    weights = [1 / (g**0.7) for g in range(1, GROUPS + 1)]
    known: dict[int, set[str]] = defaultdict(set)
    facts: list[Fact] = []
    while len(facts) < quota:
        for stream in rng.choices(range(1, GROUPS + 1), weights, k=quota - len(facts)):
            texts = known[stream]
            if len(texts) >= LIMITS.group_facts:
                continue
            if (entry := fresh_text(GROUP_TEMPLATES, "", texts, rng)) is not None:
                texts.add(entry)
                facts.append(Fact(stream, None, entry))
    return facts


def make_plan(size: int, rng: random.Random) -> Plan:
    names = make_names(rng)
    groups_of = memberships(rng)
    group_quota = round(size * GROUP_SHARE)
    facts = person_facts(size - group_quota, names, groups_of, rng) + group_facts(group_quota, rng)
    rng.shuffle(facts)  # learned over time, all chats interleaved
    consenting = sorted(rng.sample(list(names), round(PEOPLE * CONSENT_SHARE)))
    return Plan(names, facts, consenting)


# Filling -------------------------------------------------------------------------------------


def utc_now() -> datetime:
    return datetime.now(UTC)


def entry_row(entry_id: int, fact: Fact, now: datetime, rng: random.Random) -> dict[str, Any]:
    learned = now - timedelta(seconds=rng.uniform(0, 180 * 86_400))
    return {
        "id": entry_id,
        "kind": MemoryKind.FACT.value,
        "stream_id": fact.stream_id,
        "person_id": fact.person_id,
        "text": fact.text,
        "source": "extraction",
        "source_message_ids": [rng.randrange(1, 10**7) for _ in range(rng.randint(1, 3))],
        "taught_by": None,
        "job_id": None,
        "confidence": round(rng.uniform(0.4, 1.0), 2),
        "reinforced": rng.choice((0, 0, 0, 1, 2)),
        "status": "active",
        "created_at": learned,
        "updated_at": learned,
        "last_seen_at": learned,
        "embedding_model": MODEL,
        "embedding_dim": DIM,
    }


def vector_row(entry_id: int, fact: Fact, vector: bytes) -> dict[str, Any]:
    return {
        "owner": owner_key(fact.stream_id, fact.person_id),
        "model": MODEL,
        "entry_id": entry_id,
        "dim": DIM,
        "stream_id": fact.stream_id,
        "kind": MemoryKind.FACT.value,
        "vector": vector,
    }


def term_rows(entry_id: int, fact: Fact) -> list[dict[str, Any]]:
    owner = owner_key(fact.stream_id, fact.person_id)
    return [
        {"owner": owner, "term": term, "entry_id": entry_id}
        for term in sorted(index_terms(fact.text))
    ]


async def insert_people(engine: AsyncEngine, plan: Plan, now: datetime) -> None:
    streams = [
        {
            "id": s,
            "platform": "qq",
            "self_id": "10000",
            "kind": "group",
            "external_id": str(700_000 + s),
            "name": f"测试群{s}",
            "created_at": now,
            "via_group": None,
        }
        for s in range(1, GROUPS + 1)
    ]
    people = [{"id": p, "display_name": n, "created_at": now} for p, n in plan.names.items()]
    consents = [{"person_id": p, "granted_at": now, "message_id": None} for p in plan.consenting]
    async with engine.begin() as conn:
        await conn.execute(insert(Stream.__table__), streams)
        await conn.execute(insert(Person.__table__), people)
        await conn.execute(insert(MemoryConsent.__table__), consents)


async def insert_batch(
    engine: AsyncEngine,
    facts: Sequence[Fact],
    first_id: int,
    now: datetime,
    rngs: tuple[random.Random, np.random.Generator],
) -> int:
    rng, np_rng = rngs
    vectors = np_rng.standard_normal((len(facts), DIM), dtype=np.float32)
    entries, terms, stored = [], [], []
    for offset, fact in enumerate(facts):
        entries.append(entry_row(first_id + offset, fact, now, rng))
        terms += term_rows(first_id + offset, fact)
        stored.append(vector_row(first_id + offset, fact, pack(vectors[offset])))
    async with engine.begin() as conn:
        await conn.execute(insert(MemoryEntry.__table__), entries)
        await conn.execute(insert(MemoryTerm.__table__), terms)
        await conn.execute(insert(MemoryVector.__table__), stored)
    return len(terms)


@dataclass(frozen=True)
class Filled:
    seconds: float
    term_rows: int


async def fill(engine: AsyncEngine, plan: Plan, rng: random.Random) -> Filled:
    now, np_rng = utc_now(), np.random.default_rng(SEED)
    t0 = time.perf_counter()
    await insert_people(engine, plan, now)
    terms = 0
    for start in range(0, len(plan.facts), BATCH):
        batch = plan.facts[start : start + BATCH]
        terms += await insert_batch(engine, batch, start + 1, now, (rng, np_rng))
    return Filled(time.perf_counter() - t0, terms)


# Recall rounds -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    scope: RecallScope
    queries: tuple[str, str]
    vector: list[float]


def make_rounds(plan: Plan, count: int, rng: random.Random) -> list[Round]:
    groups = [s for s, people in sorted(plan.present.items()) if len(people) >= PRESENT]
    np_rng = np.random.default_rng(SEED + 1)
    rounds = []
    for _ in range(count):
        stream = rng.choice(groups)
        people = rng.sample(plan.present[stream], PRESENT)
        short = rng.choice(SHORT_FOODS)
        impression = fill_template(
            rng.choice(IMPRESSION_TEMPLATES), plan.names[rng.choice(people)], rng
        )
        vector = np_rng.standard_normal(DIM).astype(np.float32).tolist()
        rounds.append(Round(RecallScope(stream, tuple(people)), (short, impression), vector))
    return rounds


@dataclass
class Timings:
    keyword_ms: list[float] = field(default_factory=list)
    hybrid_ms: list[float] = field(default_factory=list)
    keyword_hits: list[int] = field(default_factory=list)
    vector_rows: list[int] = field(default_factory=list)


async def keyword(engine: AsyncEngine, r: Round) -> int:
    return len(await keyword_recall(engine, list(r.queries), r.scope, limit=LIMIT))


async def hybrid(engine: AsyncEngine, r: Round) -> int:
    """As recall does it: keyword scores, the visible vectors and the nearest, one list."""
    vectors = QueryVectors(MODEL, DIM, [r.vector])
    return (await recall_entries(engine, list(r.queries), r.scope, LIMIT, vectors)).vectors_read


async def time_round(engine: AsyncEngine, r: Round, t: Timings) -> None:
    t0 = time.perf_counter()
    hits = await keyword(engine, r)
    t1 = time.perf_counter()
    rows = await hybrid(engine, r)
    t2 = time.perf_counter()
    t.keyword_ms.append((t1 - t0) * 1000)
    t.hybrid_ms.append((t2 - t1) * 1000)
    t.keyword_hits.append(hits)
    t.vector_rows.append(rows)


async def recall(engine: AsyncEngine, rounds: list[Round]) -> Timings:
    for r in rounds[:WARMUP]:
        await time_round(engine, r, Timings())
    timings = Timings()
    for r in rounds[WARMUP:]:
        await time_round(engine, r, timings)
    return timings


@contextmanager
def captured_sql(engine: AsyncEngine) -> Iterator[list[tuple[str, Any]]]:
    statements: list[tuple[str, Any]] = []

    def note(_conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        statements.append((statement, params))

    event.listen(engine.sync_engine, "before_cursor_execute", note)
    try:
        yield statements
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", note)


async def query_plans(engine: AsyncEngine, r: Round) -> list[tuple[str, list[str]]]:
    """Each statement one hybrid round runs, with the database's plan for it."""
    with captured_sql(engine) as statements:
        await keyword(engine, r)
        await hybrid(engine, r)
    prefix = "EXPLAIN QUERY PLAN " if engine.dialect.name == "sqlite" else "EXPLAIN "
    plans = []
    async with engine.connect() as conn:
        for statement, params in statements:
            rows = await conn.exec_driver_sql(prefix + statement, params)
            plans.append((statement, [str(row[-1]) for row in rows]))
    return plans


# Size ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    total: int  # bytes
    vacuumed: int | None  # SQLite: the file after VACUUM
    objects: list[tuple[str, str, int]] | None  # (table, object, bytes); None without dbstat


async def autocommit(engine: AsyncEngine, sql: str) -> list[Any]:
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        result = await conn.exec_driver_sql(sql)
        return list(result) if result.returns_rows else []


async def dbstat(conn: AsyncConnection) -> list[tuple[str, str, int]] | None:
    try:
        rows = await conn.exec_driver_sql(
            "SELECT coalesce(m.tbl_name, d.name), d.name, sum(d.pgsize) FROM dbstat d "
            "LEFT JOIN sqlite_master m ON m.name = d.name GROUP BY d.name ORDER BY 3 DESC"
        )
    except DBAPIError:  # SQLite built without SQLITE_ENABLE_DBSTAT_VTAB
        return None
    return [(str(t), str(o), int(b)) for t, o, b in rows]


async def sqlite_size(engine: AsyncEngine, path: Path) -> Size:
    await autocommit(engine, "PRAGMA wal_checkpoint(TRUNCATE)")
    async with engine.connect() as conn:
        objects = await dbstat(conn)
    return Size(path.stat().st_size, None, objects)


async def sqlite_vacuumed(engine: AsyncEngine, path: Path, size: Size) -> Size:
    await autocommit(engine, "VACUUM")
    await autocommit(engine, "PRAGMA wal_checkpoint(TRUNCATE)")
    return Size(size.total, path.stat().st_size, size.objects)


async def pg_size(engine: AsyncEngine) -> Size:
    await autocommit(engine, "ANALYZE")
    async with engine.connect() as conn:
        total = await conn.scalar(text("SELECT pg_database_size(current_database())"))
        rows = await conn.execute(
            text(
                "SELECT c.relname, i.relname, pg_relation_size(i.oid) FROM pg_class c "
                "JOIN pg_index x ON x.indrelid = c.oid JOIN pg_class i ON i.oid = x.indexrelid "
                "WHERE c.relname = ANY(:tables) UNION ALL "
                "SELECT relname, relname, pg_table_size(oid) FROM pg_class "
                "WHERE relname = ANY(:tables) ORDER BY 3 DESC"
            ),
            {"tables": list(MEMORY_TABLES)},
        )
        return Size(int(total or 0), None, [(str(t), str(o), int(b)) for t, o, b in rows])


# A run ---------------------------------------------------------------------------------------


@dataclass
class Result:
    backend: str
    size: int
    plan: Plan
    filled: Filled
    timings: Timings
    store: Size
    plans: list[tuple[str, list[str]]]


async def run_size(backend: str, url: str, size: int, rounds: int) -> Result:
    rng = random.Random(SEED + size)
    plan = make_plan(size, rng)
    engine = create_engine(url)
    try:
        await upgrade_to_head(engine)
        filled = await fill(engine, plan, rng)
        path = Path(make_url(url).database or "")
        store = await (sqlite_size(engine, path) if backend == "sqlite" else pg_size(engine))
        work = make_rounds(plan, rounds + WARMUP, rng)
        timings = await recall(engine, work)
        plans = await query_plans(engine, work[0])
        if backend == "sqlite":
            store = await sqlite_vacuumed(engine, path, store)
        return Result(backend, size, plan, filled, timings, store, plans)
    finally:
        await engine.dispose()


@asynccontextmanager
async def pg_database(admin_url: str, size: int) -> AsyncIterator[str]:
    """A throwaway database on the server at `admin_url`."""
    name = f"pallas_memory_bench_{os.getpid()}_{size}"
    admin = create_engine(admin_url)
    try:
        await autocommit(admin, f'CREATE DATABASE "{name}"')
        try:
            yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
        finally:
            await autocommit(admin, f'DROP DATABASE IF EXISTS "{name}"')
    finally:
        await admin.dispose()


async def run_pg(admin_url: str, size: int, rounds: int) -> Result:
    async with pg_database(admin_url, size) as url:
        return await run_size("postgresql", url, size, rounds)


# Report --------------------------------------------------------------------------------------


def timing_row(label: str, ms: list[float]) -> str:
    ordered = sorted(ms)
    mean = statistics.fmean(ordered) if ordered else float("nan")
    return (
        f"  {label:48}{fmt(percentile(ordered, 50)):>8}{fmt(percentile(ordered, 99)):>8}"
        f"{fmt(mean):>8}{fmt(ordered[-1] if ordered else float('nan')):>8}"
    )


def p99(ms: list[float]) -> float:
    return percentile(sorted(ms), 99)


def per_10k(nbytes: int, facts: int) -> str:
    return f"{fmt(nbytes / MB, 1)} MB ({fmt(nbytes / MB * TEN_K / facts, 2)} MB per 10k facts)"


def report_header(r: Result) -> None:
    facts = r.plan.facts
    group = sum(1 for f in facts if f.person_id is None)
    print(
        f"\n-- {r.backend}: {r.size:,} facts ({GROUPS} groups, {PEOPLE:,} people; "
        f"{len(facts) - group:,} person facts, {group:,} group entries; "
        f"{len(r.plan.consenting):,} people consenting) --"
    )
    print(
        f"  fill: {fmt(r.filled.seconds, 1)} s ({r.size / r.filled.seconds:,.0f} facts/s, "
        f"{BATCH:,} entries per transaction); memory_term rows {r.filled.term_rows:,} "
        f"({fmt(r.filled.term_rows / r.size, 2)} per fact)"
    )


def report_recall(r: Result) -> None:
    t = r.timings
    print(f"  recall, {len(t.keyword_ms)} rounds, {PRESENT} present, limit {LIMIT}")
    print(f"  {'(ms)':48}{'p50':>8}{'p99':>8}{'mean':>8}{'max':>8}")
    print(timing_row("keyword: keyword_recall (2 queries)", t.keyword_ms))
    print(timing_row("hybrid: recall_entries with a query vector", t.hybrid_ms))
    print(
        f"  per round: keyword hits mean {fmt(statistics.fmean(t.keyword_hits), 1)} "
        f"(limit {LIMIT}); vectors read mean {fmt(statistics.fmean(t.vector_rows), 0)}, "
        f"max {max(t.vector_rows)}"
    )
    print(
        "  (the query's embedding is a network call to the model service: not timed, a random "
        "vector stands in)"
    )
    kw, hy = p99(t.keyword_ms), p99(t.hybrid_ms)
    print(
        f"  keyword p99 {fmt(kw)} ms   {verdict(kw <= P99_TARGET_MS)}; hybrid p99 {fmt(hy)} ms"
        f"   {verdict(hy <= P99_TARGET_MS)} (target <= {fmt(P99_TARGET_MS, 0)} ms)"
    )


def report_size(r: Result) -> None:
    s, facts = r.store, r.size
    what = "file after checkpoint" if r.backend == "sqlite" else "database (pg_database_size)"
    print(f"  size: {what} {per_10k(s.total, facts)}")
    if s.vacuumed is not None:
        print(f"        file after VACUUM {per_10k(s.vacuumed, facts)}")
    if s.objects is None:
        print("        (no dbstat in this SQLite build: per-table sizes not available)")
        return
    memory = [o for o in s.objects if o[0] in MEMORY_TABLES]
    for table, name, nbytes in memory:
        print(f"        {table:14}{name:40}{per_10k(nbytes, facts)}")
    rest = s.total - sum(b for _, _, b in memory)
    print(f"        {'everything else (other tables, catalog, free)':54}{per_10k(rest, facts)}")


def report_plans(r: Result) -> None:
    print("  query plans (one hybrid round):")
    for statement, lines in r.plans:
        print(f"    {' '.join(statement.split())[:140]} ...")
        for line in lines:
            print(f"      {line}")


def report(r: Result) -> None:
    report_header(r)
    report_recall(r)
    report_size(r)
    report_plans(r)


def summary(results: list[Result]) -> None:
    print(f"\nsummary{'':17}{'keyword p99':>13}{'hybrid p99':>12}{'MB/10k':>9}{'terms/fact':>12}")
    for r in results:
        print(
            f"  {r.backend:12}{r.size:>10,}{fmt(p99(r.timings.keyword_ms)):>13}"
            f"{fmt(p99(r.timings.hybrid_ms)):>12}"
            f"{fmt((r.store.vacuumed or r.store.total) / MB * TEN_K / r.size):>9}"
            f"{fmt(r.filled.term_rows / r.size):>12}"
        )


# Entry ---------------------------------------------------------------------------------------


def parse_sizes(value: str) -> list[int]:
    sizes = [int(part.replace("_", "")) for part in value.split(",") if part.strip()]
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("sizes must be positive integers")
    return sizes


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--sizes", type=parse_sizes, default=[10_000, 100_000], help="facts, comma-separated"
    )
    parser.add_argument("--rounds", type=int, default=500, help="timed recalls per size")
    parser.add_argument("--postgres", default="", help="also on this PostgreSQL server (URL)")
    add_loop_option(parser)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be positive")
    return args


# The turn's path ------------------------------------------------------------------------------

AFTER_TURN_ROUNDS = 1000


async def after_turn() -> tuple[list[float], list[float]]:
    """What a turn's end costs the turn with memory on: telling the observers (the runner's
    call; the memory observer then enqueues its job in a task of its own), against the
    observer's own enqueue, which runs off the path. Both in µs per turn."""
    with tempfile.TemporaryDirectory(prefix="pallas-memory-bench-") as tmp:
        engine = create_engine(f"sqlite+aiosqlite:///{Path(tmp) / 'turns.db'}")
        await upgrade_to_head(engine)
        jobs = Jobs(JobStore(engine), utc_now)
        jobs.handle(EXTRACT_KIND, _no_job)
        observers = TurnObservers()
        observer = MemoryObserver(jobs, MemoryConfig)
        observers.register(observer)
        on_path, off_path = [], []
        for turn_id in range(AFTER_TURN_ROUNDS):
            stream = StreamKey("qq", "1", StreamKind.GROUP, str(turn_id))
            ended = TurnEnded(turn_id, turn_id, stream, (turn_id,), TurnEnding.DONE, utc_now())
            t0 = time.perf_counter()
            observers.notify(ended)
            on_path.append((time.perf_counter() - t0) * 1e6)
            await observers.drain()
            t1 = time.perf_counter()
            await observer.turn_ended(replace(ended, stream_id=ended.stream_id + 10**6))
            off_path.append((time.perf_counter() - t1) * 1e6)
        await engine.dispose()
    return on_path, off_path


async def _no_job(_job: Any) -> None:
    return None


def report_after_turn(on_path: list[float], off_path: list[float]) -> None:
    def p(values: list[float], q: float) -> float:
        return sorted(values)[min(len(values) - 1, int(len(values) * q))]

    print(f"\n-- the turn's path ({AFTER_TURN_ROUNDS:,} turn endings) --")
    print(
        f"  on the path, telling the observers: p50 {p(on_path, 0.5):.0f} µs, "
        f"p99 {p(on_path, 0.99):.0f} µs (the runner's call returns before any memory work)"
    )
    print(
        f"  off the path, the memory observer's enqueue (a task of its own): "
        f"p50 {p(off_path, 0.5) / 1000:.2f} ms, p99 {p(off_path, 0.99) / 1000:.2f} ms"
    )
    print("  extraction itself runs as a job, extraction_delay_s after the turn")


def run_all(args: argparse.Namespace, runner: Any) -> list[Result]:
    results = []
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="pallas-memory-bench-") as tmp:
            url = f"sqlite+aiosqlite:///{Path(tmp) / 'memory.db'}"
            results.append(runner(run_size("sqlite", url, size, args.rounds)))
        report(results[-1])
        if args.postgres:
            results.append(runner(run_pg(args.postgres, size, args.rounds)))
            report(results[-1])
    return results


def main() -> None:
    args = parse_args()
    logged = capture_warnings()
    loop_name, runner = pick_runner(args.loop)
    print(machine_line("at start", loop_name))
    sizes = ", ".join(f"{s:,}" for s in args.sizes)
    print(f"memory benchmark  {sizes} facts, {args.rounds} recall rounds each")
    results = run_all(args, runner)
    summary(results)
    report_after_turn(*runner(after_turn()))
    print_logged(logged)
    print(f"\n{machine_line('at end', loop_name)}")


if __name__ == "__main__":
    main()
