"""The teaching guard: a pure decision, before every memory write, on what must not be kept.

Candidates come from a model's extraction over chat messages, so both the candidate text and
the messages it was drawn from are untrusted: every content rule reads both. The order of the
rules is the specification; the first that matches decides:

1. the text has no letter or digit                                  -> empty
2. the text is longer than `max_text_chars`                         -> too_long
3. prompt-injection wording (system prompt, 忽略之前的指令, 你现在是, 扮演, <system>...)
                                                                    -> injection
4. a word from the vulgar lexicon                                   -> vulgar
5. a teaching that someone is, or is to be called, a belittling word (记住你是猪,
   以后叫他废物, 他就是个笨蛋)                                          -> belittling
6. a bare "remember" with no content (记住, 记住我, 记住了吗, 给我记住)   -> bare_remember
7. an accusation, a debt, a crime, health or sexuality, unless it is a fact the speaker
   says about themselves and it points at nobody else (people.py)     -> sensitive
8. a behaviour that tells the bot what to say about people, to hand out ids or contact
   details, or that points at anyone but its author (有人问起小红就说…)  -> about_people
9. a fact about someone other than its author, unless the owner said it; a group fact
   that points at a person (a name, an @, a QQ number) is not group knowledge, for anyone;
   an episode that points at someone, unless the owner said it        -> about_another_person
10. the author is cooling down (below), unless the author is the owner -> cooldown

Owners skip rules 9 and 10 only: the lexicon, injection and people rules hold for everyone.

Cooldown, exactly. Only the author's earlier *accepted* teachings count (`recent_teachings`);
times after `now` are ignored. An accepted teaching at time t "trips" the cooldown when at
least `cooldown_after` accepted teachings (itself included) fall in the half-open window
(t - cooldown_window, t]. A new teaching at `now` is refused while now < T + cooldown, T being
the latest trip. So with the defaults (3 per 10 minutes, 30 minutes) the third teaching inside
ten minutes is kept, and everything after it is refused for thirty minutes from that third
one. A teaching exactly `cooldown_window` older than another is outside its window, and at
exactly T + cooldown teaching is allowed again.

Matching works on normalised text (`normalise`): NFKC (full-width to half-width), casefold,
invisible characters dropped, and for Chinese everything but letters and digits squeezed out,
so "傻 逼", "傻_逼" and "ＳＢ" match. Latin lexicon words must stand alone ("sb" never hits
"usb"; "s b" and "你sb" do).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from pallas.core.facts import MemoryKind
from pallas.product.teaching.lexicon import BELITTLING_WORDS, HARMLESS_PHRASES, VULGAR_WORDS
from pallas.product.teaching.people import (
    THIRD_PARTY,
    KnownPerson,
    Reference,
    find_instruction_about_people,
    find_sensitive,
    references,
    to_simplified,
)


@dataclass(frozen=True)
class Teaching:
    text: str  # what would be stored
    source_text: str  # the message(s) it was drawn from, joined
    author_person_id: int  # who said it
    about_person_id: int | None  # whom a fact is about; None: the group or the bot's behaviour
    kind: MemoryKind
    author_is_owner: bool = False
    # Whom the chat knows besides the author (names to look for) and whom the source line
    # @-mentions besides the author and the bot: a teaching pointing at them is about them.
    others: tuple[KnownPerson, ...] = ()
    mentioned: tuple[str, ...] = ()
    own_ids: tuple[str, ...] = ()  # the author's and the bot's ids: numbers that are no one else


@dataclass(frozen=True)
class GuardPolicy:
    max_text_chars: int = 200
    cooldown_window: timedelta = timedelta(minutes=10)
    cooldown_after: int = 3  # teachings by one author inside the window before a cooldown
    cooldown: timedelta = timedelta(minutes=30)

    def __post_init__(self) -> None:
        if self.max_text_chars < 1 or self.cooldown_after < 1:
            raise ValueError("max_text_chars and cooldown_after must be at least 1")
        if self.cooldown_window <= timedelta(0) or self.cooldown < timedelta(0):
            raise ValueError("cooldown_window must be positive and cooldown not negative")


DEFAULT_POLICY = GuardPolicy()


class Refusal(StrEnum):
    EMPTY = "empty"
    TOO_LONG = "too_long"
    VULGAR = "vulgar"
    BELITTLING = "belittling"
    BARE_REMEMBER = "bare_remember"
    INJECTION = "injection"
    SENSITIVE = "sensitive"
    ABOUT_PEOPLE = "about_people"
    ABOUT_ANOTHER_PERSON = "about_another_person"
    COOLDOWN = "cooldown"


# What the owner is told, one short sentence per refusal.
REFUSAL_TEXT: dict[Refusal, str] = {
    Refusal.EMPTY: "内容是空的，不记",
    Refusal.TOO_LONG: "内容太长了，不记",
    Refusal.VULGAR: "含有不雅或侮辱性的词，不记",
    Refusal.BELITTLING: "这是在贬低人，不记",
    Refusal.BARE_REMEMBER: "只说了“记住”，没有要记的内容",
    Refusal.INJECTION: "像是在改我的设定或指令，不记",
    Refusal.SENSITIVE: "说的是别人的品行、欠债、违法、健康或性取向这类事，不记",
    Refusal.ABOUT_PEOPLE: "我不会照着要求去议论别人，也不会透露谁的号码和联系方式，不记",
    Refusal.ABOUT_ANOTHER_PERSON: "别人的事要本人来说，不记",
    Refusal.COOLDOWN: "教得太频繁了，过一会儿再来",
}


@dataclass(frozen=True)
class Verdict:
    refusal: Refusal | None
    detail: str  # English, for the log: which rule, and what matched where

    @property
    def allowed(self) -> bool:
        return self.refusal is None


@dataclass(frozen=True)
class Normalised:
    loose: str  # NFKC, casefolded, no invisible characters, whitespace runs as one space
    squeezed: str  # `loose` with only its letters and digits
    clauses: tuple[str, ...]  # squeezed pieces between punctuation, then also between spaces


def normalise(text: str) -> Normalised:
    folded = unicodedata.normalize("NFKC", text).casefold()
    loose = " ".join("".join(c for c in folded if unicodedata.category(c) != "Cf").split())
    clauses = (*_clauses(loose, split_on_spaces=False), *_clauses(loose, split_on_spaces=True))
    return Normalised(loose, _squeeze(loose), tuple(dict.fromkeys(clauses)))


def judge_teaching(
    teaching: Teaching,
    recent_teachings: Sequence[datetime],
    now: datetime,
    policy: GuardPolicy = DEFAULT_POLICY,
) -> Verdict:
    """Whether `teaching` may be stored; all times aware. See the module docstring."""
    text, source = normalise(teaching.text), normalise(teaching.source_text)
    if not text.squeezed:
        return Verdict(Refusal.EMPTY, "empty: the text has no letter or digit")
    length = len(teaching.text.strip())
    if length > policy.max_text_chars:
        return Verdict(Refusal.TOO_LONG, f"too_long: {length} > {policy.max_text_chars} chars")
    for refusal, find in _CONTENT_RULES:
        for field, forms in (("text", text), ("source_text", source)):
            hit = find(forms)
            if hit is not None:
                return Verdict(refusal, f"{refusal}: {hit} in {field}")
    pointed = references(
        (text.loose, source.loose), teaching.others, teaching.mentioned, teaching.own_ids
    )
    verdict = _judge_people(teaching, text, source, pointed)
    if verdict is not None:
        return verdict
    return _judge_author(teaching, pointed, recent_teachings, now, policy)


def _judge_people(
    teaching: Teaching, text: Normalised, source: Normalised, pointed: Sequence[Reference]
) -> Verdict | None:
    """Rules 7 and 8: they hold for owners too."""
    others = bool(pointed) or any(
        THIRD_PARTY.search(to_simplified(forms.squeezed)) for forms in (text, source)
    )
    # The speaker's own health may be kept; a claim about anyone else may not. The source
    # line decides "anyone else": the stored text names the speaker in the third person.
    own = (
        teaching.kind is MemoryKind.FACT
        and teaching.about_person_id == teaching.author_person_id
        and not pointed
        and not THIRD_PARTY.search(to_simplified(source.squeezed))
    )
    # A behaviour may speak of a topic ("有人说自己抑郁时温柔点"), never of someone.
    claims = not own and (teaching.kind is not MemoryKind.BEHAVIOR or others)
    for field, forms in (("text", text), ("source_text", source)):
        hit = find_sensitive(forms.squeezed, forms.loose)
        if hit is not None and claims:
            return Verdict(Refusal.SENSITIVE, f"sensitive: {hit} in {field}")
    if teaching.kind is not MemoryKind.BEHAVIOR:
        return None
    for field, forms in (("text", text), ("source_text", source)):
        hit = find_instruction_about_people(forms.squeezed, forms.loose, others)
        if hit is not None:
            return Verdict(Refusal.ABOUT_PEOPLE, f"about_people: {hit} in {field}")
    if pointed:
        return Verdict(Refusal.ABOUT_PEOPLE, f"about_people: points at {_shown(pointed)}")
    return None


def _shown(pointed: Sequence[Reference]) -> str:
    return ", ".join(f"{r.how} {r.shown!r}" for r in pointed)


def _judge_author(
    teaching: Teaching,
    pointed: Sequence[Reference],
    recent: Sequence[datetime],
    now: datetime,
    policy: GuardPolicy,
) -> Verdict:
    about = teaching.about_person_id
    if teaching.kind is MemoryKind.FACT and about is None and pointed:
        return Verdict(
            Refusal.ABOUT_ANOTHER_PERSON,
            f"about_another_person: a group fact that points at {_shown(pointed)}",
        )
    if teaching.author_is_owner:
        return Verdict(None, "allowed: owner")
    if teaching.kind is MemoryKind.EPISODE and pointed:
        return Verdict(
            Refusal.ABOUT_ANOTHER_PERSON,
            f"about_another_person: an episode that points at {_shown(pointed)}",
        )
    if teaching.kind is MemoryKind.FACT and about not in (None, teaching.author_person_id):
        return Verdict(
            Refusal.ABOUT_ANOTHER_PERSON,
            f"about_another_person: {teaching.author_person_id} wrote about {about}",
        )
    until = cooldown_until(recent, now, policy)
    if until is not None:
        return Verdict(Refusal.COOLDOWN, f"cooldown: until {until.isoformat()}")
    return Verdict(None, "allowed")


def cooldown_until(
    recent_teachings: Sequence[datetime], now: datetime, policy: GuardPolicy = DEFAULT_POLICY
) -> datetime | None:
    """The end of the cooldown in force at `now`, or None (the rule is in the module doc)."""
    past = sorted(t for t in recent_teachings if t <= now)
    latest_trip: datetime | None = None
    for index, moment in enumerate(past):
        first_inside = bisect_right(past, moment - policy.cooldown_window, 0, index + 1)
        if index + 1 - first_inside >= policy.cooldown_after:
            latest_trip = moment
    if latest_trip is None or now >= latest_trip + policy.cooldown:
        return None
    return latest_trip + policy.cooldown


# -- normalising -------------------------------------------------------------------------

# Punctuation ends a clause; connectors (_) and dashes do not, since they are used to split
# a word to slip it past a filter ("傻_逼").
_CLAUSE_BREAKS = frozenset({"Po", "Ps", "Pe", "Pi", "Pf"})


def _is_kept(char: str) -> bool:
    return unicodedata.category(char)[0] in "LN"


def _squeeze(text: str) -> str:
    return "".join(c for c in text if _is_kept(c))


def _clauses(loose: str, *, split_on_spaces: bool) -> list[str]:
    pieces: list[str] = []
    current: list[str] = []
    for char in loose:
        if unicodedata.category(char) in _CLAUSE_BREAKS or (split_on_spaces and char == " "):
            pieces.append("".join(current))
            current = []
        elif _is_kept(char):
            current.append(char)
    pieces.append("".join(current))
    return [piece for piece in pieces if piece]


def _by_specificity(words: frozenset[str]) -> list[str]:
    # Longest first, so the log names the most specific word; sorted, so it is stable.
    return sorted(words, key=lambda word: (-len(word), word))


def _latin_word(word: str) -> re.Pattern[str]:
    # Letters may be split by separators ("s b", "s.b"), but the word must stand alone.
    body = r"[\W_]*".join(re.escape(letter) for letter in word)
    return re.compile(rf"(?<![a-z0-9]){body}(?![a-z0-9])")


# -- rule 3: injection -------------------------------------------------------------------

_INJECTION_SQUEEZED: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("system_prompt", re.compile(r"系统提示|提示词|systemprompt|sysprompt")),
    (
        "ignore_previous",
        re.compile(
            r"(?:忽略|无视|忘记|忘掉|抛弃|丢掉|不要管)掉?你?"
            r"(?:之前|以上|前面|上面|先前|此前|原来|原有|原先|所有|一切)的?(?:所有|全部|一切)?的?"
            r"(?:指令|命令|设定|规则|提示|限制|约束|人设|身份|要求|内容|对话)"
        ),
    ),
    (
        "ignore_previous",
        re.compile(
            r"(?:ignore|disregard|forget)(?:all|any|the|your)*"
            r"(?:previous|prior|above|earlier|preceding)"
        ),
    ),
    # "你现在是不是在忙" and the like are ordinary questions, not a new identity.
    ("role_reset", re.compile(r"你现在是(?!不是|否|几|什么|在|谁|哪|多少|怎|因为|为了|不|有)")),
    # "从现在开始你回复短一点" is an ordinary behaviour teaching; a new identity is not.
    (
        "role_reset",
        re.compile(
            r"从现在(?:开始|起)你(?:就|将|要|会)?(?:是|叫|扮演|成为|变成|不再|没有|不受|只听|必须)"
        ),
    ),
    (
        "persona",
        re.compile(r"你的(?:设定|人设|提示词|指令|系统设定|初始设定|角色设定|底层设定)"),
    ),
    # A new identity for the bot: "你的新身份是客服", "你以后就是客服", "你改名叫…".
    (
        "identity",
        re.compile(
            r"你的?新身份|你的?身份(?:是|改|变|换)|你(?:以后|今后|从今以后|从此|从今天起)就?是(?!不是)"
            r"|你改名(?:叫|为|成)|你不再是"
        ),
    ),
    # Only the bot being asked to play a part: "我在话剧里扮演哈姆雷特" is a fact.
    (
        "role_play",
        re.compile(r"(?:你|请)(?:来|要|现在|就|将|必须|需要|给我|继续)?扮演|角色扮演|扮演好?你的"),
    ),
    ("mode", re.compile(r"developermode|开发者模式|越狱模式|jailbreak|不受任何(?:限制|约束)")),
    (
        "instruction",
        re.compile(
            r"(?:执行|遵守|遵循|服从|听从|按照|照|接受)"
            r"(?:以下|下面|下列|如下|这些|这条|我的|新的?)的?(?:指令|命令)"
            r"|(?:新|最高|隐藏|系统|管理员|开发者)指令|指令如下|以下是指令"
        ),
    ),
)
_INJECTION_LOOSE: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "tag",
        re.compile(
            r"<\s*/?\s*(?:system|sys|assistant|developer|instructions?|im_start|im_end|prompt)"
            r"\b[^>]{0,40}>|<\|[a-z_]{2,20}\|>|<<\s*/?\s*sys\s*>>"
            r"|[\[【(]\s*/?\s*(?:system|inst|sys|系统|系统消息|管理员|开发者)\s*[\]】)]"
        ),
    ),
    (
        "role_reset",
        re.compile(
            r"\byou\s+are\s+now\s+(?:a|an|my|the|called)\b|\bfrom\s+now\s+on\s*,?\s*you\s+are\b"
            r"|\bpretend\s+(?:to\s+be|you\s+are)\b|\brole-?play\s+as\b"
        ),
    ),
)


def find_injection(forms: Normalised) -> str | None:
    for name, pattern in _INJECTION_SQUEEZED:
        if match := pattern.search(forms.squeezed):
            return f"{name} {match.group()!r}"
    for name, pattern in _INJECTION_LOOSE:
        if match := pattern.search(forms.loose):
            return f"{name} {match.group()!r}"
    return None


# -- rule 4: vulgar ----------------------------------------------------------------------

_VULGAR_CJK = [w for w in _by_specificity(VULGAR_WORDS) if not w.isascii()]
_VULGAR_LATIN = [(w, _latin_word(w)) for w in _by_specificity(VULGAR_WORDS) if w.isascii()]
_HARMLESS = _by_specificity(HARMLESS_PHRASES)


def find_vulgar(forms: Normalised) -> str | None:
    masked = forms.squeezed
    for phrase in _HARMLESS:
        masked = masked.replace(phrase, "\0" * len(phrase))
    for word in _VULGAR_CJK:
        if word in masked:
            return f"word {word!r}"
    for word, pattern in _VULGAR_LATIN:
        if pattern.search(forms.loose):
            return f"word {word!r}"
    return None


# -- rule 5: belittling ------------------------------------------------------------------

_WORD = "(?P<word>" + "|".join(re.escape(w) for w in _by_specificity(BELITTLING_WORDS)) + ")"
_SUBJECT = "(?:你们|他们|她们|你|他|她|ta|我|自己)"  # not 它: animals are called 它
_ADVERB = (
    "(?:真的|简直|根本|本来就|本来|永远|一直|果然|确实|绝对|肯定|其实|纯纯|就|真|也|还|才|都|纯|只)"
)
_DEGREE = "(?:真的|超级|特别|非常|有点|这么|那么|真|好|太|很|超|贼|巨|最)"
_MEASURE = "(?:一)?(?:个|只|头|条|坨)"
_PREFIX = "(?:大|死|臭|老|超级)?"
# The insult must end its clause or be followed by a particle: "他是狗主人" is not one.
_END = "(?=$|[啊吧呀哦呢了嘛吗啦哈噢喔咯么呗嘞哇耶])"
_BELITTLING_CLAUSE = tuple(
    re.compile(pattern + _END)
    for pattern in (
        f"{_SUBJECT}{_ADVERB}{{0,3}}是{_MEASURE}?{_PREFIX}{_WORD}",  # 记住你是猪
        f"{_ADVERB}是{_MEASURE}?{_PREFIX}{_WORD}",  # 小明就是笨蛋
        f"是一?个{_PREFIX}{_WORD}",  # 小明是个废物
        f"(?:叫|喊|称呼|称){_SUBJECT}?(?:为|做|作|成)?{_PREFIX}{_WORD}",  # 以后叫他废物
        # 你这个废物, 你个笨蛋; not "他那只狗" (his dog)
        f"{_SUBJECT}(?:这{_MEASURE}|一?个){_PREFIX}{_WORD}",
        f"{_SUBJECT}{_DEGREE}{{1,2}}{_WORD}",  # 你好蠢
    )
)
_LATIN_WORD = (
    "(?P<word>"
    + "|".join(re.escape(w) for w in _by_specificity(BELITTLING_WORDS) if w.isascii())
    + ")"
)
_BELITTLING_LOOSE = (
    re.compile(
        r"\b(?:you|u|he|she|they|i)\s*(?:are|is|am|r|['’]re|['’]s|['’]m)\s+"
        rf"(?:(?:such|so|really|very|just|a|an|big|fat)\s+)*{_LATIN_WORD}\b"
    ),
    re.compile(rf"\bcall\s+(?:him|her|me|you|them)\s+(?:an?\s+)?{_LATIN_WORD}\b"),
)


def find_belittling(forms: Normalised) -> str | None:
    match = next(belittling_matches(forms), None)
    return None if match is None else f"word {match.group('word')!r} in {match.group()!r}"


def belittling_matches(forms: Normalised) -> Iterator[re.Match[str]]:
    """Every belittling phrase, clause by clause (the match says whom it is about)."""
    for clause in forms.clauses:
        for pattern in _BELITTLING_CLAUSE:
            yield from pattern.finditer(clause)
    for pattern in _BELITTLING_LOOSE:
        yield from pattern.finditer(forms.loose)


# -- rule 6: bare remember ---------------------------------------------------------------

_MEANINGFUL_MIN = 4  # letters or digits left besides the verb and filler
_REMEMBER = re.compile(
    r"(?:请|你要|你给我|给我|帮我|替我|你一定要|一定要|你|要)?"
    r"(?:记住|记得|记下来|记下|记好|记牢|牢记|remember)"
)
_FILLER = re.compile(
    r"这个|那个|这些|那些|这句话|这句|这件事|这事|此事|一下|this|that|it"
    r"|[了吗哦啊呀吧呢啦嘛哈噢喔咯么呗嘞哇耶嗯好]"
)


def find_bare_remember(forms: Normalised) -> str | None:
    if not _REMEMBER.search(forms.squeezed):
        return None
    rest = _FILLER.sub("", _REMEMBER.sub("", forms.squeezed))
    if len(rest) >= _MEANINGFUL_MIN:
        return None
    return f"{forms.squeezed!r} leaves {len(rest)} meaningful chars"


_CONTENT_RULES: tuple[tuple[Refusal, Callable[[Normalised], str | None]], ...] = (
    (Refusal.INJECTION, find_injection),
    (Refusal.VULGAR, find_vulgar),
    (Refusal.BELITTLING, find_belittling),
    (Refusal.BARE_REMEMBER, find_bare_remember),
)


__all__ = [
    "DEFAULT_POLICY",
    "REFUSAL_TEXT",
    "GuardPolicy",
    "MemoryKind",
    "Normalised",
    "Refusal",
    "Teaching",
    "Verdict",
    "cooldown_until",
    "find_bare_remember",
    "find_belittling",
    "find_injection",
    "find_vulgar",
    "judge_teaching",
    "normalise",
]
