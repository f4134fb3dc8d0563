"""The teaching guard's rules about people (docs/memory.md, "What is refused"): a memory must
not become a way to say things about someone who is not there to answer.

Three pure checks over the candidate and the line it came from:

- `references`: whom a teaching names or points at besides its author: a name or card of
  someone in the chat, an @ in the source line, a number that looks like a QQ or phone
  number. A group-level entry that points at a person is not group knowledge.
- `find_sensitive`: accusations, debts, crimes, health and sexuality. Said by the speaker
  about themselves they may be kept ("我对花生过敏"); about anyone else never.
- `find_instruction_about_people`: a behaviour that tells the bot what to say about people
  ("有人问起小红就说…", "说她坏话") or to hand out ids and contact details.

Text is matched after the guard's normalising and a fold of traditional characters to
simplified ones (only those these rules read), so "小紅偷過錢" reads as "小红偷过钱".
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

# Traditional -> simplified, for the characters the rules below and common names use.
_T2S = str.maketrans(
    "紅過錢還騙詐搶殺強姦賭監獄犯軌愛滋憂鬱懷孕墮戀債貸賴帳號碼電話飛機藥癥腫瘤癱瘓"
    "婦產診醫院療說訴開裡這個們麼給與們問時讓誰對當幫關剛發現聽見覺識記應該會為從後",
    "红过钱还骗诈抢杀强奸赌监狱犯轨爱滋忧郁怀孕堕恋债贷赖账号码电话飞机药症肿瘤瘫痪"
    "妇产诊医院疗说诉开里这个们么给与们问时让谁对当帮关刚发现听见觉识记应该会为从后",
)


def to_simplified(text: str) -> str:
    return text.translate(_T2S)


@dataclass(frozen=True)
class KnownPerson:
    """Someone the chat knows, other than the teaching's author."""

    person_id: int
    user_id: str
    names: tuple[str, ...]  # card, nickname: as shown in the chat


@dataclass(frozen=True)
class Reference:
    """A person a teaching points at: `person_id` when the chat knows who it is."""

    how: str  # name / at / number
    shown: str  # what was found, for the log
    person_id: int | None


MIN_NAME_CHARS = 2  # a one-character card would be found in every other line
# Cards that are everyday words would be found in every other line too: not looked for.
COMMON_WORDS = frozenset(
    {
        "周末", "今天", "明天", "昨天", "晚上", "早上", "中午", "下午", "哈哈",
        "嘿嘿", "呵呵", "大家", "群主", "管理", "管理员", "老师", "同学", "朋友",
        "小号", "大号", "机器人", "吃饭", "睡觉", "工作", "上班", "下班", "游戏",
        "开黑", "学习", "考试", "老板", "老大", "兄弟", "姐妹", "宝宝", "宝贝",
        "路人", "路过", "潜水", "萌新", "新人", "没有", "不是", "可以", "什么",
        "这个", "那个", "今晚", "周五", "周六", "周日", "音乐", "电影", "奶茶",
        "咖啡", "猫猫", "狗狗", "无名", "匿名", "用户", "admin", "user", "test",
    }
)
# A number is someone's id when the chat knows it as one, or when it is written as one.
_NUMBER = re.compile(r"(?<![0-9.:/\-])[1-9][0-9]{4,11}(?![0-9.:/\-])")
_ID_CONTEXT = re.compile(
    r"(?:qq|扣扣|企鹅|q号|电话|手机|微信|vx|wx|号码|联系方式|账号|@)\s*(?:号|号码)?\s*(?:是|为|:)?\s*$"
)
_GROUP_NUMBER = re.compile(r"群号|群号码|群聊号")


def references(
    texts: Sequence[str],
    others: Sequence[KnownPerson],
    mentioned: Sequence[str],
    own_ids: Collection[str] = (),
) -> tuple[Reference, ...]:
    """Whom the texts (candidate, source; normalised, not squeezed) point at; the author is
    not in `others` nor in `mentioned`, and `own_ids` (the author's, the bot's) are nobody
    else's."""
    found: dict[str, Reference] = {}
    by_user = {p.user_id: p for p in others}
    for user_id in mentioned:
        person = by_user.get(user_id)
        found[f"at:{user_id}"] = Reference("at", user_id, person.person_id if person else None)
    for text in (to_simplified(t) for t in texts):
        squeezed = _squeeze(text)
        for person in others:
            name = next((n for n in _names(person) if n in squeezed), None)
            if name is not None:
                found.setdefault(f"p:{person.person_id}", Reference("name", name, person.person_id))
        for number, person_id in _numbers(text, by_user, own_ids):
            found.setdefault(f"n:{number}", Reference("number", number, person_id))
    return tuple(found.values())


def _numbers(
    text: str, by_user: Mapping[str, KnownPerson], own_ids: Collection[str]
) -> Iterator[tuple[str, int | None]]:
    """The ids in a text: numbers the chat knows as someone's, or written as an id (QQ号,
    电话); prices, dates and times are neither."""
    if _GROUP_NUMBER.search(text):
        return
    for match in _NUMBER.finditer(text):
        number = match.group()
        if number in own_ids:
            continue
        if number in by_user:
            yield number, by_user[number].person_id
        elif _ID_CONTEXT.search(text[max(0, match.start() - 8) : match.start()]):
            yield number, None


def _names(person: KnownPerson) -> list[str]:
    return [
        folded
        for name in person.names
        if len(folded := to_simplified(_squeeze(name.casefold()))) >= MIN_NAME_CHARS
        and folded not in COMMON_WORDS
    ]


def _squeeze(text: str) -> str:
    return "".join(c for c in text if c.isalnum())


def subject_of(found: Sequence[Reference]) -> int | None:
    """The one known person a teaching is about, when it points at exactly one."""
    known = {r.person_id for r in found}
    return next(iter(known)) if len(known) == 1 and None not in known else None


# -- sensitive claims ----------------------------------------------------------------------

_SENSITIVE: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "accusation",
        re.compile(
            r"(?<!偷)偷(?!偷|懒|笑|乐|闲|听|瞄|吃|空|跑|菜|师|学)|小偷|扒手|骗(?!人的吧|你的)|诈骗|骗子|抢劫|抢钱"
            r"|作弊|抄袭|剽窃|贪污|挪用|受贿|行贿|造谣|诽谤|出轨|劈腿|小三|外遇|包养|嫖|卖淫"
            r"|援交|约炮|偷拍|猥亵|性侵|强奸|骚扰|家暴|打老婆|虐待"
        ),
    ),
    (
        "debt",
        re.compile(
            r"欠(?:了|着|过|我|你|他|她|大家|别人|钱|债|款|[0-9一二三四五六七八九十两几百千万]+)"
            r"|借钱不还|不还钱|拒绝还钱|不肯还|赖着不还|赖账|老赖|欠债|网贷|高利贷|套路贷"
        ),
    ),
    (
        "crime",
        re.compile(
            r"犯罪|犯法|违法|坐过?牢|蹲过?(?:监狱|号子)|进过?局子|被(?:警察)?抓|被拘|拘留|判刑"
            r"|案底|前科|吸毒|贩毒|嗑药|赌博|赌钱|赌鬼|杀过?人|杀人犯|洗钱|传销|逃犯|通缉"
        ),
    ),
    (
        "health",
        re.compile(
            r"艾滋|hiv|aids|性病|梅毒|淋病|乙肝|(?<![懒尬])癌|肿瘤|白血病|抑郁|忧郁症|精神病|精神分裂|躁郁"
            r"|双相|自闭|残疾|瘫痪|怀孕|流产|堕胎|不孕|阳痿|早泄|化疗|绝症|有病|病(?:了|重|危)"
        ),
    ),
    (
        "sexuality",
        re.compile(
            r"同性恋|同志(?!们)|基佬|拉拉(?!队)|蕾丝|双性恋|跨性别|变性|性取向|出柜|性癖|性冷淡|处男|处女(?!座)"
        ),
    ),
)
# Lookarounds rather than \b: pinyin often follows Chinese directly ("群主touguoqian").
_SENSITIVE_LATIN = re.compile(
    r"(?<![a-z])(?:gay|lesbian|bisexual|hiv|aids|thief|stole|steal|cheated|debt|owes?"
    r"|touguoqian|touqian|qianqianbuhuan|laolai|pianzi|xidu|zuolao|tongxinglian|aizibing)"
    r"(?![a-z])"
)


# A rule against a thing is not a claim about anyone: "本群禁止赌博", "谨防诈骗". Only when
# the forbidding word governs the match: "群主不要脸偷了班费" is a claim.
_FORBIDDING = re.compile(
    r"(?:禁止|不许|不准|严禁|杜绝|拒绝|谨防|防止|小心|当心|警惕|反对|不聊|别聊|不谈|不要|别)"
    r"(?:发|聊|谈|讨论|传|搞|参与|涉及|任何|再)?$"
)


def find_sensitive(squeezed: str, loose: str) -> str | None:
    """The first sensitive claim in a text (`squeezed` and `loose` as the guard forms them)."""
    text = to_simplified(squeezed)
    for name, pattern in _SENSITIVE:
        for match in pattern.finditer(text):
            if not _FORBIDDING.search(text[: match.start()]):
                return f"{name} {match.group()!r}"
    if match := _SENSITIVE_LATIN.search(loose):
        return f"latin {match.group()!r}"
    return None


# -- behaviours about people ---------------------------------------------------------------

# Who else a line is about without naming them: a pronoun or a role.
THIRD_PARTY = re.compile(
    r"他|她|ta|群主|管理|同事|朋友|室友|同学|老板|领导|对象|老婆|老公|男朋友|女朋友|爸|妈|哥|姐"
    r"|弟|妹|家人|别人|某人|那个人|这个人|那谁"
)
_INSTRUCTION_ABOUT_PEOPLE: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("bad_words", re.compile(r"(?:说|讲)[^说讲]{0,8}(?:坏话|黑料|丑事|八卦|隐私|把柄)")),
    (
        "attack",
        re.compile(
            r"(?<!不要)(?<!不许)(?<!不准)(?<!不能)(?<!禁止)(?<!别)"
            r"(?:骂|怼|嘲讽|嘲笑|挖苦|损|喷|羞辱|针对|孤立|踢|禁言)(?:他|她|ta|他们|她们|这个人|那个人)"
        ),
    ),
    (
        "say_he_is",
        re.compile(r"(?:就|都|要)?(?:说|讲|告诉大家|告诉别人)(?:他|她|ta)(?:是|偷|欠|有|被|在)"),
    ),
    (
        "contact",
        re.compile(
            r"qq号|qq号码|扣扣号|企鹅号|手机号|电话号|电话|微信号|联系方式|住址|家庭地址|家住"
            r"|身份证|真名|真实姓名|银行卡|开房记录|ip地址"
        ),
    ),
)
# What to answer when something comes up: about people only ("问起小红就说…"), not topics
# ("有人问到价格就回答看群公告").
_SAY_WHEN = re.compile(
    r"(?:问起|问到|提到|提起|说起|聊到|聊起|看到|见到|碰到)[^就]{0,12}(?:就|都|要|你)"
    r"(?:说|讲|告诉|回答|回复|骂|怼|嘲)"
)
_CONTACT_LATIN = re.compile(r"(?<![a-z])(?:qq|vx|wx|wechat|phone|address)(?![a-z])")


def find_instruction_about_people(squeezed: str, loose: str, about_people: bool) -> str | None:
    """What in a behaviour tells the bot to talk about people or hand out their details;
    `about_people`: the behaviour points at someone (a name, an @, a pronoun)."""
    text = to_simplified(squeezed)
    for name, pattern in _INSTRUCTION_ABOUT_PEOPLE:
        if match := pattern.search(text):
            return f"{name} {match.group()!r}"
    if about_people and (match := _SAY_WHEN.search(text)):
        return f"say_about {match.group()!r}"
    if match := _CONTACT_LATIN.search(loose):
        return f"contact {match.group()!r}"
    return None


__all__ = [
    "THIRD_PARTY",
    "KnownPerson",
    "Reference",
    "find_instruction_about_people",
    "find_sensitive",
    "references",
    "subject_of",
    "to_simplified",
]
