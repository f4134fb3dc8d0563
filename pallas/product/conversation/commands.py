"""The commands stage, right after silence (and the persona stage): owners and group admins
steer the bot from the chat (docs/commands.md).

A message whose typed words start with a command start (`COMMAND_START`, `/` by default) and
a known name or alias is answered by the command through the outbox and goes no further: no
gate, no turn buffer, no model. The question and the answer both stay in the timeline.
Who may use a command is its audience: owners (SUPERUSERS) everything, a group's owner and
admins (`sender.role`) the group's own switches, members what only concerns themselves. A
refusal says why once; the same command over and over gets a few answers a minute, then
silence (still audited). Anything else, unknown names included, is ordinary chat.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import IntEnum
from typing import Protocol

from loguru import logger

from pallas.core.actions import Origin
from pallas.core.inbound import InboundMessage, Segment, SegmentKind, StreamKind
from pallas.core.text import typed_text
from pallas.product.conversation.delivery.contract import OutgoingMessage, Sender
from pallas.product.conversation.ingress import CONTINUE, StageResult, StoredMessage, Verdict

PREFIX = "/"
ANSWERS_PER_WINDOW = 3  # the same command from one person, answered this often a minute
ANSWER_WINDOW = timedelta(minutes=1)
REFUSAL_EVERY = timedelta(minutes=10)  # a refusal says why once, then keeps quiet this long
MAX_TRACKED = 5_000


class Audience(IntEnum):
    """Who may use a command; a higher rank may use everything below it."""

    MEMBER = 1
    ADMIN = 2  # the group's owner or an admin, in that group
    OWNER = 3  # SUPERUSERS, anywhere


AUDIENCE_WORDS = {Audience.MEMBER: "大家", Audience.ADMIN: "群主和管理员", Audience.OWNER: "主人"}


@dataclass(frozen=True)
class CommandCall:
    name: str
    args: str
    stored: StoredMessage
    rank: Audience = Audience.OWNER  # what the caller may use


class Command(Protocol):
    name: str
    summary: str  # one line for the help, in Chinese

    async def run(self, call: CommandCall) -> str:
        """The answer to send (Chinese, plain text); empty when it answers later itself."""


@dataclass(frozen=True)
class Entry:
    command: Command
    audience: Audience
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Syntax:
    starts: tuple[str, ...] = (PREFIX,)  # COMMAND_START; "" means no prefix needed
    seps: tuple[str, ...] = (".",)  # COMMAND_SEP: "/开启.复读" reads as "/开启 复读"


def normalise(text: str) -> str:
    """Full-width forms folded (／帮助, ＡＢＣ), runs of spaces made one."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def parse_command(
    text: str, known: Iterable[str], syntax: Syntax = Syntax()
) -> tuple[str, str] | None:
    """(name, args) when the text is a command start, a known name and its arguments (pure).
    The longest start and the longest name win ("/安静" before "/安")."""
    words = normalise(text)
    names = sorted(set(known), key=len, reverse=True)
    for start in sorted(syntax.starts, key=len, reverse=True):
        if not words.startswith(start):
            continue
        rest = words[len(start) :]
        for name in names:
            tail = rest[len(name) :]
            if rest.startswith(name) and (not tail or tail[0] == " " or tail[0] in syntax.seps):
                return name, tail.lstrip("".join(syntax.seps)).strip()
    return None


def rank_of(msg: InboundMessage, owners: frozenset[str]) -> Audience:
    if msg.sender.user_id in owners:
        return Audience.OWNER
    if msg.stream.kind is StreamKind.GROUP and msg.sender.role in ("owner", "admin"):
        return Audience.ADMIN
    return Audience.MEMBER


@dataclass
class CommandLimits:
    """Answers and refusals per (person, command), bounded; time is passed in."""

    answered: dict[tuple[int, str], list[datetime]] = field(default_factory=dict)
    refused: dict[tuple[int, str], datetime] = field(default_factory=dict)

    def may_answer(self, key: tuple[int, str], now: datetime) -> bool:
        recent = [t for t in self.answered.get(key, []) if now - t < ANSWER_WINDOW]
        allowed = len(recent) < ANSWERS_PER_WINDOW
        self.answered[key] = [*recent, now] if allowed else recent
        _trim(self.answered)
        return allowed

    def may_refuse(self, key: tuple[int, str], now: datetime) -> bool:
        last = self.refused.get(key)
        if last is not None and now - last < REFUSAL_EVERY:
            return False
        self.refused[key] = now
        _trim(self.refused)
        return True


def _trim(book: dict[tuple[int, str], object]) -> None:
    while len(book) > MAX_TRACKED:
        book.pop(next(iter(book)))


class CommandStage:
    name = "commands"

    def __init__(
        self,
        commands: Sequence[Command],
        owners: Iterable[str],
        sender: Sender,
        action_ids: Callable[[], int],
        *,
        syntax: Syntax = Syntax(),
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._entries: dict[str, Entry] = {}
        self._owners = frozenset(owners)
        self._sender = sender
        self._action_ids = action_ids
        self._syntax = syntax
        self._clock = clock
        self._limits = CommandLimits()
        for command in commands:
            self.register(command)
        self.register(HelpCommand(self), Audience.MEMBER, ("帮助",))

    def register(
        self, command: Command, audience: Audience = Audience.OWNER, aliases: Sequence[str] = ()
    ) -> None:
        """Add a command (a plugin package does this when loaded); owners only by default."""
        names = [command.name, *aliases]
        taken = [n for n in names if n in self._names()]
        if taken:
            raise ValueError(f"command /{taken[0]} is registered twice")
        self._entries[command.name] = Entry(command, audience, tuple(aliases))

    def _names(self) -> dict[str, Entry]:
        return {n: e for e in self._entries.values() for n in (e.command.name, *e.aliases)}

    @property
    def start(self) -> str:
        """The command start the help shows (the first configured)."""
        return self._syntax.starts[0]

    def usable(self, rank: Audience) -> list[Entry]:
        return [e for e in self._entries.values() if e.audience <= rank]

    async def on_message(self, stored: StoredMessage) -> StageResult:
        msg = stored.message
        if msg.is_poke or msg.from_bot:
            return CONTINUE
        names = self._names()
        parsed = parse_command(typed_text(msg.segments), names, self._syntax)
        if parsed is None:
            return CONTINUE
        entry, args = names[parsed[0]], parsed[1]
        rank = rank_of(msg, self._owners)
        name = entry.command.name
        now = self._clock() if self._clock else msg.time
        key = (stored.sender_person_id, name)
        if entry.audience > rank:
            if not self._limits.may_refuse(key, now):
                return StageResult(Verdict.HANDLED, f"command_{name}_refused_again")
            answer = f"{self.start}{name} 只有{AUDIENCE_WORDS[entry.audience]}能用。"
            return await self._answer(stored, answer, f"command_{name}_refused")
        if not self._limits.may_answer(key, now):
            return StageResult(Verdict.HANDLED, f"command_{name}_flood")
        answer = await self._run(entry.command, CommandCall(name, args, stored, rank))
        if not answer:  # it answers later (a job's message): nothing to say now
            return StageResult(Verdict.HANDLED, f"command_{name}")
        return await self._answer(stored, answer, f"command_{name}")

    async def _run(self, command: Command, call: CommandCall) -> str:
        try:
            return await command.run(call)
        except Exception as exc:  # a broken command answers with the failure, not silence
            logger.opt(exception=exc).error("command /{} failed", call.name)
            return f"命令 /{call.name} 出错了：{type(exc).__name__}"

    async def _answer(self, stored: StoredMessage, answer: str, reason: str) -> StageResult:
        action = self._action_ids()
        segments = (Segment(SegmentKind.TEXT, text=answer),)
        key = f"command:{stored.message_id}"
        outgoing = OutgoingMessage(action, stored.stream_id, segments, key, origin=Origin.COMMAND,
                                   account=stored.message.stream.self_id)  # fmt: skip
        await self._sender.send(outgoing)
        return StageResult(Verdict.HANDLED, reason, action)


class HelpCommand:
    name = "help"
    summary = "列出你在这里能用的命令"

    def __init__(self, stage: CommandStage) -> None:
        self._stage = stage

    async def run(self, call: CommandCall) -> str:
        start = self._stage.start
        lines = []
        for entry in self._stage.usable(call.rank):
            also = "、".join(f"{start}{alias}" for alias in entry.aliases)
            shown = f"{start}{entry.command.name}" + (f"（{also}）" if also else "")
            lines.append(f"{shown}：{entry.command.summary}")
        return "你能用的命令：\n" + "\n".join(lines)
