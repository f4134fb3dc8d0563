"""One attempt against one OpenAI-compatible service, through the official SDK.

The SDK's own retries are off: the manager decides what happens after a failure. Every
exception an attempt can end in is turned into a `FailureKind` here, in one place.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import openai
import pydantic
from openai import AsyncOpenAI
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from pallas.providers.catalog import ProviderSpec
from pallas.providers.errors import FailureKind

CONNECT_TIMEOUT_S = 10.0


class MalformedResponseError(Exception):
    """The service answered 2xx with something that is not a usable completion."""


@dataclass(frozen=True)
class ChatRequest:
    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]] = ()
    tool_choice: str | Mapping[str, Any] | None = None
    temperature: float | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class RawUsage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int


@dataclass(frozen=True)
class RawToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class RawChat:
    text: str
    tool_calls: tuple[RawToolCall, ...]
    finish_reason: str
    usage: RawUsage | None


@dataclass(frozen=True)
class RawEmbeddings:
    vectors: tuple[tuple[float, ...], ...]
    prompt_tokens: int | None


@dataclass(frozen=True)
class RawTranscription:
    text: str
    usage: RawUsage | None  # None: the service reported no token counts


@dataclass(frozen=True)
class RawSpeech:
    audio: bytes
    mime: str


# What each speech format is served as when the service does not say (OpenAI's formats).
SPEECH_MIME = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}
# Content types that name no audio format: the one asked for is assumed instead.
_GENERIC_MIME = frozenset({"", "application/octet-stream", "binary/octet-stream"})


def build_client(provider: ProviderSpec, api_key: str) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=provider.base_url,
        api_key=api_key or "none",  # local services take any key; the SDK demands one
        default_headers=dict(provider.headers),
        timeout=openai.Timeout(
            provider.timeout_s, connect=min(CONNECT_TIMEOUT_S, provider.timeout_s)
        ),
        max_retries=0,
    )


async def chat_once(
    client: AsyncOpenAI, upstream: str, request: ChatRequest, *, stream: bool, timeout_s: float
) -> RawChat:
    """One completion; the whole attempt (stream included) is bounded by `timeout_s`."""
    options: dict[str, Any] = {"model": upstream, "messages": list(request.messages)}
    if request.tools:
        options["tools"] = list(request.tools)
        if request.tool_choice is not None:
            options["tool_choice"] = request.tool_choice
    if request.temperature is not None:
        options["temperature"] = request.temperature
    if request.max_tokens is not None:
        options["max_tokens"] = request.max_tokens
    async with asyncio.timeout(timeout_s):
        if not stream:
            return _from_completion(await client.chat.completions.create(**options))
        chunks = await client.chat.completions.create(
            **options, stream=True, stream_options={"include_usage": True}
        )
        try:
            return await _collect_stream(chunks)
        finally:
            await chunks.close()


async def embed_once(
    client: AsyncOpenAI, upstream: str, texts: Sequence[str], *, timeout_s: float
) -> RawEmbeddings:
    async with asyncio.timeout(timeout_s):
        response = await client.embeddings.create(model=upstream, input=list(texts))
    data = sorted(response.data or [], key=lambda item: item.index)
    if len(data) != len(texts):
        raise MalformedResponseError(f"{len(data)} vectors for {len(texts)} inputs")
    usage = response.usage.prompt_tokens if response.usage is not None else None
    return RawEmbeddings(tuple(tuple(item.embedding) for item in data), usage)


async def transcribe_once(
    client: AsyncOpenAI,
    upstream: str,
    audio: bytes,
    filename: str,
    *,
    timeout_s: float,
    language: str | None,
) -> RawTranscription:
    """One `POST /audio/transcriptions`; blank text is a valid answer (silence)."""
    options: dict[str, Any] = {"model": upstream, "file": (filename, audio)}
    if language:
        options["language"] = language
    async with asyncio.timeout(timeout_s):
        response = await client.audio.transcriptions.create(**options, response_format="json")
    # The SDK builds the answer without validating it: a missing field is simply absent.
    text = getattr(response, "text", None)
    if not isinstance(text, str):
        raise MalformedResponseError("the transcription has no text")
    return RawTranscription(text, transcription_usage(getattr(response, "usage", None)))


def transcription_usage(usage: object) -> RawUsage | None:
    """Token counts when the service bills by token; per-second usage has none to give."""
    if getattr(usage, "type", None) != "tokens":
        return None
    prompt = getattr(usage, "input_tokens", None)
    completion = getattr(usage, "output_tokens", None)
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return RawUsage(prompt, completion, 0)


async def speak_once(
    client: AsyncOpenAI,
    upstream: str,
    text: str,
    *,
    voice: str,
    response_format: str,
    timeout_s: float,
) -> RawSpeech:
    """One `POST /audio/speech`; an answer without audio bytes is a failed attempt."""
    async with asyncio.timeout(timeout_s):
        response = await client.audio.speech.create(
            model=upstream,
            voice=voice,
            input=text,
            response_format=response_format,  # type: ignore[arg-type]
        )
        # Not streamed: the SDK has read the whole body by now.
        audio = response.content
    content_type = response.response.headers.get("content-type", "")
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime.startswith(("application/json", "text/")):
        # Some gateways answer 200 with an error document instead of a status code.
        raise MalformedResponseError(f"the speech answer is {mime}, not audio")
    if not audio:
        raise MalformedResponseError("the speech answer carried no audio")
    if mime in _GENERIC_MIME:
        mime = SPEECH_MIME.get(response_format, "application/octet-stream")
    return RawSpeech(audio, mime)


def _from_completion(response: ChatCompletion) -> RawChat:
    if not response.choices:
        raise MalformedResponseError("the response has no choices")
    choice = response.choices[0]
    calls = tuple(
        RawToolCall(call.id or f"call_{i}", call.function.name, call.function.arguments or "")
        for i, call in enumerate(choice.message.tool_calls or ())
        if call.type == "function"
    )
    return RawChat(
        text=choice.message.content or "",
        tool_calls=calls,
        finish_reason=choice.finish_reason or "",
        usage=_usage(response.usage),
    )


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamState:
    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish_reason: str = ""
    usage: RawUsage | None = None
    saw_choice: bool = False


async def _collect_stream(chunks: AsyncIterator[ChatCompletionChunk]) -> RawChat:
    state = _StreamState()
    async for chunk in chunks:
        if chunk.usage is not None:
            state.usage = _usage(chunk.usage)
        for choice in chunk.choices or ():
            if choice.index == 0:
                _apply_delta(state, choice)
    if not state.saw_choice:
        raise MalformedResponseError("the stream carried no choices")
    if not state.finish_reason:
        raise MalformedResponseError("the stream ended before a finish reason (truncated)")
    calls = tuple(
        RawToolCall(call.id or f"call_{index}", call.name, "".join(call.arguments))
        for index, call in sorted(state.calls.items())
    )
    return RawChat("".join(state.text), calls, state.finish_reason, state.usage)


def _apply_delta(state: _StreamState, choice: Any) -> None:
    state.saw_choice = True
    delta = choice.delta
    if delta is not None and delta.content:
        state.text.append(delta.content)
    for position, fragment in enumerate((delta.tool_calls if delta else None) or ()):
        # Arguments arrive in pieces keyed by index; some services omit the index.
        index = fragment.index if fragment.index is not None else position
        call = state.calls.setdefault(index, _PartialCall())
        call.id = call.id or (fragment.id or "")
        if fragment.function is not None:
            call.name = call.name or (fragment.function.name or "")
            if fragment.function.arguments:
                call.arguments.append(fragment.function.arguments)
    if choice.finish_reason:
        state.finish_reason = choice.finish_reason


def _usage(usage: CompletionUsage | None) -> RawUsage | None:
    if usage is None:
        return None
    cached = 0
    if usage.prompt_tokens_details is not None:
        cached = usage.prompt_tokens_details.cached_tokens or 0
    # DeepSeek reports cache hits in its own field.
    extra = usage.model_extra or {}
    cached = cached or int(extra.get("prompt_cache_hit_tokens") or 0)
    return RawUsage(usage.prompt_tokens or 0, usage.completion_tokens or 0, cached)


def classify(exc: BaseException) -> tuple[FailureKind, str, float | None]:
    """(kind, short cause, seconds the service asked us to wait) for a failed attempt."""
    if isinstance(exc, TimeoutError | openai.APITimeoutError):
        return FailureKind.TIMEOUT, "no answer within the timeout", None
    if isinstance(exc, openai.APIStatusError):
        return _classify_status(exc)
    if _is_truncated_body(exc):
        return FailureKind.MALFORMED_RESPONSE, f"truncated response: {_cause(exc)}", None
    if isinstance(exc, openai.APIConnectionError):
        return FailureKind.CONNECTION_ERROR, _cause(exc), None
    if isinstance(
        exc,
        MalformedResponseError
        | json.JSONDecodeError
        | pydantic.ValidationError
        | openai.APIResponseValidationError
        | openai.APIError,
    ):
        return FailureKind.MALFORMED_RESPONSE, _cause(exc), None
    return FailureKind.MALFORMED_RESPONSE, f"unexpected {type(exc).__name__}: {exc}", None


def _is_truncated_body(exc: BaseException) -> bool:
    """The answer started and the connection closed before it was complete."""
    # Matched by name: the SDK's HTTP client (httpx or httpx2) differs between releases.
    return any(
        type(error).__name__ == "RemoteProtocolError" and "complete message body" in str(error)
        for error in (exc, exc.__cause__)
    )


def _classify_status(exc: openai.APIStatusError) -> tuple[FailureKind, str, float | None]:
    code = exc.status_code
    detail = f"HTTP {code}: {_short(exc.message)}"
    if code == 429:
        return FailureKind.RATE_LIMITED, detail, retry_after_seconds(exc.response.headers)
    if code >= 500 or code in {408, 409}:
        return FailureKind.SERVER_ERROR, detail, None
    if code in {401, 403}:
        return FailureKind.AUTH_ERROR, detail, None
    return FailureKind.BAD_REQUEST, detail, None


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    text = f"{type(exc).__name__}: {exc}"
    if cause is not None and str(cause) and str(cause) not in text:
        text = f"{text} ({type(cause).__name__}: {cause})"
    return _short(text)


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…"
