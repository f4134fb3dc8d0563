"""What a model call returns, and the tag that says what it was for."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Purpose(StrEnum):
    """Why a call was made; accounting groups cost by it."""

    DECISION = "decision"
    REPLY = "reply"
    EXTRACTION = "extraction"
    SUMMARY = "summary"
    EMBEDDING = "embedding"
    VISION = "vision"
    SPEECH = "speech"  # text to speech
    TRANSCRIPTION = "transcription"  # speech to text
    TOOL = "tool"
    OTHER = "other"


@dataclass(frozen=True)
class CallTag:
    purpose: Purpose
    stream_id: int | None = None
    turn_id: int | None = None
    stream_key: str = ""  # human-readable, for the call log only


@dataclass(frozen=True)
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False  # the service reported none; counted from the text instead


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    raw_arguments: str
    arguments: dict[str, Any] | None  # None when raw_arguments is not a JSON object
    arguments_error: str = ""


def parse_tool_call(call_id: str, name: str, raw_arguments: str) -> ToolCall:
    """Decode arguments; a bad payload is kept and explained, for the caller to feed back."""
    text = raw_arguments.strip() or "{}"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return ToolCall(call_id, name, raw_arguments, None, f"arguments are not JSON: {exc}")
    if not isinstance(value, dict):
        return ToolCall(call_id, name, raw_arguments, None, "arguments are not a JSON object")
    return ToolCall(call_id, name, raw_arguments, value)


@dataclass(frozen=True)
class ChatResult:
    text: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str
    usage: TokenUsage
    model: str  # the registered model that actually answered
    upstream_model: str
    cost: float
    latency_ms: float
    attempts: int


@dataclass(frozen=True)
class EmbeddingResult:
    vectors: tuple[tuple[float, ...], ...]
    usage: TokenUsage
    model: str  # vectors are only comparable with vectors of the same model
    cost: float
    latency_ms: float


@dataclass(frozen=True)
class TranscriptionResult:
    text: str  # may be empty or blank: the audio held no speech
    model: str
    cost: float
    latency_ms: float
    # Only services that bill by token report usage; the rest (per-minute billing) leave zeros.
    usage: TokenUsage = TokenUsage()


@dataclass(frozen=True)
class SpeechResult:
    audio: bytes
    mime: str  # e.g. "audio/mpeg"; from the answer's content type, else from the format asked
    model: str
    cost: float
    latency_ms: float
    usage: TokenUsage = TokenUsage()  # the input text, estimated: speech services report none
