"""The owner's commands: the second stage, right after silence.

A message from an owner (SUPERUSERS) that starts with `/` and a known command name is answered
by the command through the outbox and goes no further: no gate, no turn buffer, no model. The
question and the answer both stay in the timeline, so later turns see that it was asked and
what was said. Anyone else's `/...` is an ordinary message, and an owner's unknown `/word`
too: commands never swallow chat they do not know.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from loguru import logger

from pallas.core.inbound import Segment, SegmentKind
from pallas.core.text import typed_text
from pallas.product.conversation.delivery.contract import OutgoingMessage, Sender
from pallas.product.conversation.ingress import CONTINUE, StageResult, StoredMessage, Verdict

PREFIX = "/"


@dataclass(frozen=True)
class CommandCall:
    name: str
    args: str
    stored: StoredMessage


class Command(Protocol):
    name: str
    summary: str  # one line for /help, in Chinese

    async def run(self, call: CommandCall) -> str:
        """The answer to send (Chinese, plain text)."""


def parse_command(text: str, known: Iterable[str]) -> tuple[str, str] | None:
    """(name, args) when the text is `/name args` for a known name, else None (pure)."""
    stripped = text.strip()
    if not stripped.startswith(PREFIX):
        return None
    name, _, args = stripped.removeprefix(PREFIX).partition(" ")
    return (name, args.strip()) if name in set(known) else None


class CommandStage:
    name = "commands"

    def __init__(
        self,
        commands: Sequence[Command],
        owners: Iterable[str],
        sender: Sender,
        action_ids: Callable[[], int],
    ) -> None:
        self._commands = {command.name: command for command in commands}
        self._commands.setdefault("help", HelpCommand(self._commands))
        self._owners = frozenset(owners)
        self._sender = sender
        self._action_ids = action_ids

    def register(self, command: Command) -> None:
        """Add a command (a plugin package does this when loaded)."""
        if command.name in self._commands and command.name != "help":
            raise ValueError(f"command /{command.name} is registered twice")
        self._commands[command.name] = command

    async def on_message(self, stored: StoredMessage) -> StageResult:
        msg = stored.message
        if msg.sender.user_id not in self._owners or msg.is_poke:
            return CONTINUE
        parsed = parse_command(_own_words(msg.segments), self._commands)
        if parsed is None:
            return CONTINUE
        name, args = parsed
        try:
            answer = await self._commands[name].run(CommandCall(name, args, stored))
        except Exception as exc:  # a broken command answers with the failure, not silence
            logger.opt(exception=exc).error("command /{} failed", name)
            answer = f"命令 /{name} 出错了：{type(exc).__name__}"
        action = self._action_ids()
        segments = (Segment(SegmentKind.TEXT, text=answer),)
        key = f"command:{stored.message_id}"
        await self._sender.send(OutgoingMessage(action, stored.stream_id, segments, key))
        return StageResult(Verdict.HANDLED, f"command_{name}", action)


class HelpCommand:
    name = "help"
    summary = "列出可用的命令"

    def __init__(self, commands: dict[str, Command]) -> None:
        self._commands = commands

    async def run(self, call: CommandCall) -> str:
        lines = [f"{PREFIX}{c.name}：{c.summary}" for c in self._commands.values()]
        return "可用的命令：\n" + "\n".join(lines)


def _own_words(segments: Sequence[Segment]) -> str:
    """The text the sender typed: a leading @ of the bot and a quote are not part of it."""
    return typed_text(segments)
