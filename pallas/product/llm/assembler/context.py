"""Context assembly: everything one turn shows the model, gathered once, no model calls.

The result (`PreparedTurn`) is immutable and shared by every call of the turn (decision,
reply, repair), so they all reason over the same picture.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKey, StreamKind
from pallas.product.conversation.gate.gate import Outcome
from pallas.product.conversation.gate.trigger import SpeakTrigger
from pallas.product.conversation.turns.turn import Turn
from pallas.product.llm.tools.skills import SkillBook
from pallas.providers.estimate import estimate_tokens
from pallas.store.conversation import (
    WindowLine,
    names_in_stream,
    stream_info,
    window_up_to,
)

BATCH_TEXT_CHARS = 2_000  # one message of the batch, as shown to the model
CONTEXT_TEXT_CHARS = 500  # one older message
LINE_OVERHEAD_TOKENS = 12  # the JSON keys around each line


@dataclass(frozen=True)
class Character:
    name: str
    description: str
    style: str
    # How the bot is right now (mood, routine, session tone): code-made, from fixed words.
    state: str = ""


class CharacterSource(Protocol):
    """Who the bot is in a turn, when a feature keeps it per account (persona: edited
    character, mood, routine)."""

    async def character(self, turn: Turn) -> Character: ...


@dataclass(frozen=True)
class Scene:
    kind: StreamKind
    group_name: str  # empty in a private chat or when unknown
    present: tuple[str, ...]  # who spoke in the window, by name


@dataclass(frozen=True)
class ContextLine:
    message_id: int
    platform_message_id: str
    speaker: str
    user_id: str
    from_bot: bool
    text: str
    time: datetime
    in_batch: bool
    reply_to: int | None  # our id of the quoted message, when it is in the window
    is_poke: bool
    recalled: bool
    role: str = ""  # owner / admin in a group; empty for members and when unknown


@dataclass(frozen=True)
class ContextBlock:
    """Material from a context source (memory, knowledge, relations, schedule)."""

    source: str
    title: str
    text: str
    priority: int = 0  # lower goes first when the budget is short
    # What the source did, for the turn's trace (e.g. which recall mode ran); never shown.
    trace: Mapping[str, Any] = field(default_factory=dict)
    # Only how things are said (the group's expression samples): shown to the call that
    # writes the reply, never to a decision that may stay silent (prompt.py).
    shapes_reply: bool = False


class ContextSource(Protocol):
    name: str

    async def fetch(self, turn: Turn) -> ContextBlock | None: ...


class TurnPreparer(Protocol):
    """Work on the turn's own messages before its context is read (pictures described, voices
    transcribed); returns what it did, for the turn's trace."""

    name: str

    async def prepare(self, turn: Turn) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class PreparedTurn:
    turn_id: int
    stream_id: int
    stream: StreamKey
    character: Character  # who the bot is in this turn, and its state of mind
    scene: Scene
    lines: tuple[ContextLine, ...]
    batch_ids: tuple[int, ...]
    watermark: int
    trigger: SpeakTrigger
    forced: bool
    blocks: tuple[ContextBlock, ...] = ()
    dropped_lines: int = 0
    dropped_blocks: int = 0
    skill_text: str = ""  # the owner's embedded skills: trusted, goes into the system prompt
    # What the preparers did, by name, for the turn's trace; never shown.
    preparations: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # A turn the bot started itself: why it may speak now (code-made, trusted).
    occasion: str = ""

    @property
    def batch(self) -> tuple[ContextLine, ...]:
        return tuple(line for line in self.lines if line.in_batch)

    def line(self, message_id: int) -> ContextLine | None:
        return next((line for line in self.lines if line.message_id == message_id), None)


@dataclass
class AssemblyDeps:
    engine: AsyncEngine
    character: Character  # the agent file's, when no feature keeps one per account
    token_budget: int
    sources: Sequence[ContextSource] = field(default_factory=tuple)
    skills: SkillBook | None = None
    preparers: Sequence[TurnPreparer] = field(default_factory=tuple)
    characters: Sequence[CharacterSource] = field(default_factory=tuple)  # the last one speaks


async def assemble_context(turn: Turn, deps: AssemblyDeps) -> PreparedTurn:
    preparations = {p.name: trace for p in deps.preparers if (trace := await p.prepare(turn))}
    character = await deps.characters[-1].character(turn) if deps.characters else deps.character
    batch_ids = tuple(m.message_id for m in turn.messages)
    # The window is the speak trigger's size of history before the batch, plus the batch.
    window = await window_up_to(
        deps.engine, turn.stream_id, turn.watermark, turn.timeline_size + len(batch_ids)
    )
    names = await mention_names(deps.engine, turn, window, character.name)
    lines = to_context_lines(window, frozenset(batch_ids), names)
    info = await stream_info(deps.engine, turn.stream_id)
    blocks = [block for source in deps.sources if (block := await source.fetch(turn))]
    kept_lines, kept_blocks = fit_to_budget(lines, blocks, deps.token_budget)
    return PreparedTurn(
        turn_id=turn.turn_id,
        stream_id=turn.stream_id,
        stream=turn.stream,
        character=character,
        scene=Scene(turn.stream.kind, info.name if info else "", present_people(kept_lines)),
        lines=kept_lines,
        batch_ids=batch_ids,
        watermark=turn.watermark,
        trigger=turn.trigger,
        forced=turn.disposition.outcome is Outcome.FORCE,
        blocks=kept_blocks,
        dropped_lines=len(lines) - len(kept_lines),
        dropped_blocks=len(blocks) - len(kept_blocks),
        skill_text=await deps.skills.embedded_text() if deps.skills else "",
        preparations=preparations,
        occasion=turn.occasion.hint if turn.occasion else "",
    )


async def mention_names(
    engine: AsyncEngine, turn: Turn, window: Sequence[WindowLine], bot_name: str
) -> dict[str, str]:
    """The names to show for the ids @-mentioned in the window (the platform gives ids)."""
    wanted = {uid for line in window for uid in line.mentions} - {turn.stream.self_id}
    names = await names_in_stream(engine, turn.stream_id, wanted)
    names[turn.stream.self_id] = bot_name
    return names


def to_context_lines(
    window: Sequence[WindowLine],
    batch_ids: frozenset[int],
    names: Mapping[str, str] | None = None,
) -> tuple[ContextLine, ...]:
    by_platform_id = {line.platform_message_id: line.message_id for line in window}
    return tuple(
        ContextLine(
            message_id=line.message_id,
            platform_message_id=line.platform_message_id,
            speaker=line.speaker or f"用户{line.user_id[-4:]}",
            user_id=line.user_id,
            from_bot=line.from_bot,
            text=_shown_text(line, line.message_id in batch_ids, names or {}),
            time=line.time,
            in_batch=line.message_id in batch_ids,
            reply_to=by_platform_id.get(line.reply_to) if line.reply_to else None,
            is_poke=line.is_poke,
            recalled=line.recalled,
            role=line.role if line.role in ("owner", "admin") else "",
        )
        for line in window
    )


def _shown_text(line: WindowLine, in_batch: bool, names: Mapping[str, str]) -> str:
    if line.recalled:
        return "(已撤回)"
    text = named_mentions(line.text, line.mentions, names)
    if line.is_poke and line.mentions and line.mentions[0] in names:
        text = f"[戳一戳 → {names[line.mentions[0]]}]"  # the stored text names ids only
    limit = BATCH_TEXT_CHARS if in_batch else CONTEXT_TEXT_CHARS
    return text if len(text) <= limit else f"{text[:limit]}…(后略)"


def named_mentions(text: str, mentions: Sequence[str], names: Mapping[str, str]) -> str:
    """ "@1234500001" -> "@阿四" for every mentioned id whose name is known."""
    for user_id in mentions:
        name = names.get(user_id)
        if name:
            text = re.sub(rf"@{re.escape(user_id)}(?!\d)", lambda _m, n=name: f"@{n}", text)
    return text


def present_people(lines: Sequence[ContextLine]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for line in reversed(lines):  # the most recent speakers first
        if not line.from_bot:
            seen.setdefault(line.speaker, None)
    return tuple(seen)


def line_tokens(line: ContextLine) -> int:
    return estimate_tokens(line.speaker) + estimate_tokens(line.text) + LINE_OVERHEAD_TOKENS


def fit_to_budget(
    lines: Sequence[ContextLine], blocks: Sequence[ContextBlock], budget: int
) -> tuple[tuple[ContextLine, ...], tuple[ContextBlock, ...]]:
    """Keep the prompt under `budget` tokens: the oldest history goes first, then the
    lowest-priority context blocks; the batch is never dropped."""
    kept_lines = list(lines)
    kept_blocks = sorted(blocks, key=lambda b: -b.priority)
    total = sum(line_tokens(line) for line in kept_lines) + sum(
        estimate_tokens(b.text) for b in kept_blocks
    )
    index = 0
    while total > budget and index < len(kept_lines):
        if kept_lines[index].in_batch:
            index += 1
            continue
        total -= line_tokens(kept_lines.pop(index))
    while total > budget and kept_blocks:
        total -= estimate_tokens(kept_blocks.pop().text)
    return tuple(kept_lines), tuple(kept_blocks)
