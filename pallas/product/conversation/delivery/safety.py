"""What never leaves the bot as such (docs/delivery.md, "Outgoing safety"): every message row
is screened by the dispatcher just before it is sent, whatever part of the bot queued it.

- a word of the vulgar lexicon (the teaching guard's, plus the owner's words file): the message
  is refused, never sent;
- a mobile phone number, an ID-card number, a number written as a QQ number, and the QQ
  number of anyone the bot knows, however written: masked, unless it is the asker's own (or
  the bot's);
- a link, when the owner turned the link rule on: masked unless its host is on the allow list;
- `@全体成员`: only in a command's answer (an owner's command); elsewhere dropped.

Pure: the payload in, the payload to send (or None) and the rules that hit out. Numbers are
found with full-width digits read as digits and spaces or dashes between them ignored, so
"１３８ ００１３ ８０００" is a phone number too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from loguru import logger

from pallas.core.actions import Origin
from pallas.core.inbound import Segment, SegmentKind
from pallas.product.conversation.delivery.payload import platform_text
from pallas.product.teaching.guard import find_vulgar, normalise

MASK = "[已隐藏]"
LINK_MASK = "[链接已隐藏]"
# A link as it is written in chat: scheme or www., then URL characters (ASCII: a Chinese
# character, a bracket or a quote ends it).
_LINK = re.compile(r"(?i)(?<![A-Za-z0-9.])(?:https?://|www\.)[A-Za-z0-9\-._~:/?#@!$&*+,;=%]+")
# "@全体成员" typed as text: it notifies nobody, but reads as the bot calling everyone.
_AT_ALL_TEXT = re.compile(r"[@＠]\s*(全体成员|全体|所有人|everyone|all)(?![A-Za-z])", re.IGNORECASE)
_BARE_NUMBER = re.compile(r"(?<![\d.])[1-9]\d{4,10}(?![\d.])")
_DIGITS = str.maketrans("０１２３４５６７８９", "0123456789")
_GAP = r"[\s\-－—]?"  # how people space a number out; never a dot (versions, addresses)
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "id_card",
        re.compile(
            r"(?<![\d.])[1-9]\d{5}(?:19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx]"
            r"(?![\dXx.])"
        ),
    ),
    # A mobile number whole, or grouped 3-4-4 as people write it.
    ("phone", re.compile(r"(?<![\d.])(?:\+?86[\s\-]?)?1[3-9]\d(?:\d{8}|" + _GAP + r"\d{4}" + _GAP
                         + r"\d{4})(?![\d.])")),
    (
        "qq_number",
        re.compile(
            r"(?i)(?:qq|扣扣|企鹅|q号)\s*(?:号|号码)?\s*(?:是|为|:|：)?\s*"
            r"(?P<n>[1-9](?:" + _GAP + r"\d){4,10})(?!\d)"
        ),
    ),
)


@dataclass(frozen=True)
class Screened:
    payload: dict[str, Any] | None  # what to send; None: refused
    rules: tuple[str, ...] = ()  # what hit, for the audit

    @property
    def changed(self) -> bool:
        return bool(self.rules)


@dataclass(frozen=True)
class LinkRule:
    """Off by default; on, every link is masked but those to an allowed host (or below it)."""

    on: bool = False
    allowed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Numbers:
    """Whose QQ numbers the text may hold: `known` are ids of people the bot has seen (masked
    wherever they appear), `own` the asker's and the bot's (never masked)."""

    known: frozenset[str] = frozenset()
    own: frozenset[str] = frozenset()


NOBODY = Numbers()


@dataclass(frozen=True)
class OutgoingScreen:
    """The screen with the owner's extra words (`words`, normalised like the lexicon's) and
    the link rule as the console has it now."""

    words: frozenset[str] = field(default_factory=frozenset)
    links: Callable[[], LinkRule] = LinkRule

    def __call__(
        self, payload: dict[str, Any], origin: str | None, numbers: Numbers = NOBODY
    ) -> Screened:
        return screen(payload, origin, self.words, self.links(), numbers)


def bare_numbers(text: str) -> frozenset[str]:
    """The numbers in `text` that could be QQ numbers (5 to 11 digits, full-width read)."""
    return frozenset(_BARE_NUMBER.findall(text.translate(_DIGITS)))


def screen(
    payload: dict[str, Any],
    origin: str | None,
    words: Iterable[str] = (),
    links: LinkRule = LinkRule(),
    numbers: Numbers = NOBODY,
) -> Screened:
    text = str(payload.get("text", ""))
    word = _banned_word(text, words)
    # A command's answer quotes what members said (/状态, a memory listing): never refused.
    if word is not None and origin != Origin.COMMAND.value:
        return Screened(None, (f"word:{word}",))
    rules: list[str] = []
    segments = []
    for segment in payload.get("segments") or []:
        if segment.get("kind") == SegmentKind.AT_ALL.value and origin != Origin.COMMAND.value:
            rules.append("at_all")
            continue
        if segment.get("kind") == SegmentKind.TEXT.value:
            masked, hits = mask_text(str(segment.get("text", "")), links, numbers)
            if origin != Origin.COMMAND.value:
                masked, calls = _AT_ALL_TEXT.subn(r"\1", masked)
                hits += ["at_all"] * calls
            segment = {**segment, "text": masked}
            rules += hits
        segments.append(segment)
    if not rules:
        return Screened(payload)
    if payload.get("segments"):  # the text the platform's echo will have, as sent
        kept = platform_text([Segment.from_json(item) for item in segments])
    else:
        kept = mask_text(text, links, numbers)[0]
    return Screened({**payload, "segments": segments, "text": kept}, tuple(rules))


def mask_text(
    text: str, links: LinkRule = LinkRule(), numbers: Numbers = NOBODY
) -> tuple[str, list[str]]:
    """`text` with links (under the rule) and numbers masked, and the rules that hit."""
    text, link_hits = mask_links(text, links)
    text, number_hits = mask_numbers(text, numbers)
    return text, link_hits + number_hits


def mask_links(text: str, rule: LinkRule) -> tuple[str, list[str]]:
    if not rule.on:
        return text, []
    hits: list[str] = []

    def masked(match: re.Match[str]) -> str:
        if _allowed(match.group(0), rule.allowed):
            return match.group(0)
        hits.append("link")
        return LINK_MASK

    return _LINK.sub(masked, text), hits


def _allowed(link: str, allowed: Iterable[str]) -> bool:
    try:  # the host as a browser reads it: "https://good.com:x@evil.example" is evil.example
        host = urlsplit(link if "//" in link else f"http://{link}").hostname or ""
    except ValueError:
        return False
    host = host.lower().removeprefix("www.")
    for item in allowed:
        wanted = item.strip().lower().removeprefix("www.")
        if wanted and (host == wanted or host.endswith("." + wanted)):
            return True
    return False


def mask_numbers(text: str, numbers: Numbers = NOBODY) -> tuple[str, list[str]]:
    """`text` with phone, ID-card and QQ numbers masked, and the rules that hit: a QQ number
    written as one, or the id of someone the bot knows, unless it is the asker's own."""
    probe = text.translate(_DIGITS)  # one character for one: positions stay the same
    spans: list[tuple[int, int, str]] = []
    for rule, pattern in _PATTERNS:
        for match in pattern.finditer(probe):
            start, end = match.span("n") if "n" in pattern.groupindex else match.span()
            if rule != "qq_number" or _squeezed(probe[start:end]) not in numbers.own:
                _add(spans, start, end, rule)
    for match in _BARE_NUMBER.finditer(probe):
        if match.group(0) in numbers.known - numbers.own:
            _add(spans, *match.span(), "member_id")
    for start, end, _rule in sorted(spans, reverse=True):
        text = text[:start] + MASK + text[end:]
    return text, [rule for _s, _e, rule in spans]


def _add(spans: list[tuple[int, int, str]], start: int, end: int, rule: str) -> None:
    if not any(s < end and start < e for s, e, _ in spans):
        spans.append((start, end, rule))


def _squeezed(number: str) -> str:
    return re.sub(r"[\s\-－—]", "", number)


# Innocent phrases the lexicon's short words sit inside, in what the bot itself says.
_HARMLESS = re.compile(r"[妈姑姨舅大奶后干老伯婶]妈的|妈妈的")


def _banned_word(text: str, extra: Iterable[str]) -> str | None:
    forms = normalise(_HARMLESS.sub("", text))
    hit = find_vulgar(forms)
    if hit is not None:
        return hit.removeprefix("word ").strip("'")
    return next((w for w in extra if w and w in forms.squeezed), None)


def load_words(path: Path) -> frozenset[str]:
    """The owner's extra words, one a line (`#` starts a comment); a file that cannot be read
    is said in the log and adds nothing (the built-in list still holds)."""
    if not path.exists():
        return frozenset()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        logger.warning("outgoing words file {} not read ({}); the built-in list holds", path, exc)
        return frozenset()
    words = {normalise(line.split("#", 1)[0]).squeezed for line in lines}
    return frozenset(w for w in words if w)


__all__ = [
    "LINK_MASK",
    "MASK",
    "NOBODY",
    "LinkRule",
    "Numbers",
    "OutgoingScreen",
    "Screened",
    "bare_numbers",
    "load_words",
    "mask_numbers",
    "mask_text",
    "screen",
]
