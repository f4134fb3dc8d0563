"""What a tool is: a declared spec, two availability hooks, and an async run.

A tool is known by its stable key (`name`, dotted like `web.fetch`); switches and overrides
are stored by that key. Everything a tool returns is data for the model, never instructions.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.inbound import StreamKey, StreamKind

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")
READ_ONLY_WORDS = ("list", "search", "get", "find", "read", "fetch", "history", "now", "show")


class ToolTag(StrEnum):
    READ_ONLY = "read_only"
    SIDE_EFFECT = "side_effect"
    EXTERNAL_NETWORK = "external_network"
    NEEDS_CONFIRMATION = "needs_confirmation"


class Visibility(StrEnum):
    VISIBLE = "visible"  # offered whenever its domain is in play
    DEFERRED = "deferred"  # offered only when its hints match or `tools.find` activated it


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: Mapping[str, Any]  # JSON schema of the arguments (an object schema)
    tags: frozenset[ToolTag] = frozenset()
    domains: tuple[str, ...] = ("general",)
    hints: tuple[str, ...] = ()  # words that, said in the conversation, bring the tool in
    visibility: Visibility = Visibility.VISIBLE
    timeout_s: float = 10.0
    essential: bool = False  # cannot be switched off

    @property
    def read_only(self) -> bool:
        """Declared, or inferred from the name when nothing is declared."""
        if ToolTag.READ_ONLY in self.tags:
            return True
        if self.tags & {ToolTag.SIDE_EFFECT, ToolTag.NEEDS_CONFIRMATION}:
            return False
        last = self.name.rsplit(".", 1)[-1]
        return any(last.startswith(word) or last.endswith(word) for word in READ_ONLY_WORDS)


@dataclass(frozen=True)
class Availability:
    available: bool = True
    reason: str = ""  # a short Chinese sentence for the owner and the model

    @classmethod
    def no(cls, reason: str) -> Availability:
        return cls(False, reason)


@dataclass(frozen=True)
class Conversation:
    """Who a tool would act for: the facts availability may depend on."""

    stream_id: int
    stream: StreamKey
    asker_is_owner: bool = False

    @property
    def kind(self) -> StreamKind:
        return self.stream.kind


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may use."""

    conversation: Conversation
    turn_id: int
    watermark: int
    engine: AsyncEngine
    now: datetime
    visible_message_ids: tuple[int, ...] = ()  # the ids the model has already seen
    asker_user_ids: tuple[str, ...] = ()  # who wrote the batch (platform user ids)
    # What tools chose for this turn's reply (a sticker to send), read when the reply goes
    # out; the one mutable part of the context, shared by the turn's calls.
    choices: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolOutput:
    """A tool's answer: JSON-able data for the model, and optional facts for the turn."""

    data: Any
    activated: tuple[str, ...] = ()  # deferred tools this call brought in (tools.find)
    extra: Mapping[str, Any] = field(default_factory=dict)


class ToolError(Exception):
    """A tool could not do what was asked; the message (Chinese) goes back to the model."""


class Tool(ABC):
    """Subclass, set `spec` and implement `run`; override the hooks that apply."""

    spec: ToolSpec

    def can_enable(self) -> Availability:
        """The environment: a missing key, a missing model."""
        return Availability()

    def is_available_for(self, conversation: Conversation) -> bool:
        """The conversation: e.g. group-only tools."""
        return True

    @abstractmethod
    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        """Do the work; raise `ToolError` with a readable reason when it cannot be done."""
