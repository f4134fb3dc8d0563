"""The model manager: pick a model for a call, fail over, and account for every attempt.

  candidates (preferred, then spread or fixed order) -> attempt (one key, one timeout)
-> ok: usage row + call log -> result
-> retryable failure: rest the model, next candidate
-> rejected (400/401): stop, it is a configuration problem
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from random import Random
from typing import Any, TypeVar

from loguru import logger
from openai import AsyncOpenAI

from pallas.providers.budget import DEFAULT_OUTPUT_TOKENS, DailyBudget, Spend
from pallas.providers.call_log import CallLog
from pallas.providers.call_record import CallRecord, summary_line
from pallas.providers.catalog import DETERMINISTIC_TYPES, Catalog, ModelSpec, ModelType
from pallas.providers.errors import AttemptFailure, NoModelError
from pallas.providers.estimate import estimate_tokens, message_tokens
from pallas.providers.failover import FailoverPlan, Pause, Try
from pallas.providers.openai_wire import (
    ChatRequest,
    RawChat,
    RawEmbeddings,
    RawSpeech,
    RawTranscription,
    build_client,
    chat_once,
    classify,
    embed_once,
    speak_once,
    transcribe_once,
)
from pallas.providers.results import (
    CallTag,
    ChatResult,
    EmbeddingResult,
    Purpose,
    SpeechResult,
    TokenUsage,
    TranscriptionResult,
    parse_tool_call,
)
from pallas.providers.selection import CircuitBreaker, order_candidates
from pallas.store.llm_usage import LlmCallRow

UsageSink = Callable[[LlmCallRow], None]


def _discard(row: LlmCallRow) -> None:
    return None


@dataclass
class ManagerDeps:
    usage: UsageSink = _discard
    call_log: CallLog | None = None
    wall_clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    monotonic: Callable[[], float] = time.monotonic
    rng: Random = field(default_factory=Random)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    budget: DailyBudget | None = None  # the daily cap every call reserves against


@dataclass(frozen=True)
class _Attempt:
    """The fixed facts of one try, shared by its accounting row and its call-log record."""

    spec: ModelSpec
    model_type: ModelType
    tag: CallTag
    number: int
    started_at: datetime
    started: float


@dataclass(frozen=True)
class _Logged:
    """What the call log shows as an attempt's input, whatever its outcome."""

    messages: Sequence[Mapping[str, Any]] = ()
    texts: Sequence[str] = ()


NOTHING = Spend()  # what a call reserves when its worst case is not known beforehand
# Work nobody waits for: it stops first as the day's budget runs low (docs/cost.md).
AMBIENT = frozenset({Purpose.EXTRACTION, Purpose.SUMMARY, Purpose.VISION})
_Raw = TypeVar("_Raw")
_Result = TypeVar("_Result")


class ModelManager:
    def __init__(self, catalog: Catalog, deps: ManagerDeps | None = None) -> None:
        self.catalog = catalog
        self._deps = deps or ManagerDeps()
        self._breaker = CircuitBreaker(catalog.breaker)
        self._preferred = dict(catalog.preferred)
        self._clients: dict[tuple[str, int], AsyncOpenAI] = {}
        self._key_turns: dict[str, Iterator[int]] = {
            p.name: itertools.cycle(range(len(p.api_keys))) for p in catalog.providers
        }

    @property
    def budget(self) -> DailyBudget | None:
        """The daily cap calls reserve against; None: no cap."""
        return self._deps.budget

    # -- what is available ------------------------------------------------------------

    def has(self, model_type: ModelType) -> bool:
        return bool(self.catalog.of_type(model_type))

    def supports_tools(self, model_type: ModelType) -> bool:
        return any(m.tool_calling for m in self.catalog.of_type(model_type))

    def set_preferred(self, model_type: ModelType, name: str | None) -> None:
        """Pin a type to a registered model (None: back to the default spread)."""
        if name is None:
            self._preferred.pop(model_type, None)
            return
        spec = self.catalog.model(name)
        if spec is None or model_type not in spec.types:
            raise NoModelError(f"no model named {name!r} has type {model_type.value}")
        self._preferred[model_type] = name

    def candidates(
        self, model_type: ModelType, *, model: str | None = None, needs_tools: bool = False
    ) -> list[ModelSpec]:
        """The models to try for a call, in the order they will be tried."""
        if model is not None:
            spec = self.catalog.model(model)
            if spec is None:
                raise NoModelError(f"no model registered under the name {model!r}")
            return [spec]
        specs = self.catalog.of_type(model_type)
        if not specs:
            raise NoModelError(
                f"no model registered for type {model_type.value}; "
                f"add one with `types: [{model_type.value}]` in the providers file"
            )
        if needs_tools:
            specs = tuple(s for s in specs if s.tool_calling)
            if not specs:
                raise NoModelError(f"no {model_type.value} model supports native tool calling")
        if len(specs) == 1:
            return list(specs)
        names = order_candidates(
            [s.name for s in specs],
            preferred=self._preferred.get(model_type),
            deterministic=model_type in DETERMINISTIC_TYPES,
            rng=self._deps.rng,
        )
        by_name = {s.name: s for s in specs}
        return [by_name[name] for name in names]

    # -- calls ------------------------------------------------------------------------

    async def chat(
        self,
        request: ChatRequest,
        *,
        tag: CallTag,
        model_type: ModelType = ModelType.CHAT,
        model: str | None = None,
        stream: bool | None = None,
    ) -> ChatResult:
        candidates = self.candidates(model_type, model=model, needs_tools=bool(request.tools))
        if model is None:
            candidates = self._cheaper_first(candidates)

        async def once(spec: ModelSpec) -> RawChat:
            return await chat_once(
                self._client(spec.provider),
                spec.upstream,
                _with_model_defaults(request, spec),
                stream=spec.stream if stream is None else stream,
                timeout_s=self._timeout_s(spec),
            )

        def succeeded(attempt: _Attempt, raw: RawChat) -> ChatResult:
            return self._chat_succeeded(attempt, request, raw)

        worst = max((worst_case(spec, request) for spec in candidates), key=lambda w: w.cost)
        return await self._serve(
            candidates, model_type, tag, once, succeeded, _Logged(messages=request.messages),
            worst,
        )  # fmt: skip

    async def embed(
        self, texts: Sequence[str], *, tag: CallTag, model: str | None = None
    ) -> EmbeddingResult:
        candidates = self.candidates(ModelType.EMBEDDING, model=model)
        # Vectors must share one space: only the first embedding model ever answers.
        candidates = candidates if model is not None else candidates[:1]

        async def once(spec: ModelSpec) -> RawEmbeddings:
            return await embed_once(
                self._client(spec.provider), spec.upstream, texts, timeout_s=self._timeout_s(spec)
            )

        def succeeded(attempt: _Attempt, raw: RawEmbeddings) -> EmbeddingResult:
            return self._embed_succeeded(attempt, texts, raw)

        return await self._serve(
            candidates, ModelType.EMBEDDING, tag, once, succeeded, _Logged(texts=texts)
        )

    async def transcribe(
        self,
        audio: bytes,
        filename: str,
        *,
        tag: CallTag,
        model: str | None = None,
        language: str | None = None,
    ) -> TranscriptionResult:
        """Speech to text; `filename`'s extension tells the service the audio format."""
        candidates = self.candidates(ModelType.ASR, model=model)
        logged = _Logged(texts=[_audio_note(filename, audio, language)])

        async def once(spec: ModelSpec) -> RawTranscription:
            return await transcribe_once(
                self._client(spec.provider),
                spec.upstream,
                audio,
                filename,
                timeout_s=self._timeout_s(spec),
                language=language,
            )

        def succeeded(attempt: _Attempt, raw: RawTranscription) -> TranscriptionResult:
            return self._transcription_succeeded(attempt, logged, raw)

        return await self._serve(candidates, ModelType.ASR, tag, once, succeeded, logged)

    async def speak(
        self,
        text: str,
        *,
        tag: CallTag,
        voice: str = "alloy",
        model: str | None = None,
        response_format: str = "mp3",
    ) -> SpeechResult:
        """Text to speech: the audio bytes in `response_format` and their MIME type."""
        candidates = self.candidates(ModelType.TTS, model=model)
        logged = _Logged(texts=[text])

        async def once(spec: ModelSpec) -> RawSpeech:
            return await speak_once(
                self._client(spec.provider),
                spec.upstream,
                text,
                voice=voice,
                response_format=response_format,
                timeout_s=self._timeout_s(spec),
            )

        def succeeded(attempt: _Attempt, raw: RawSpeech) -> SpeechResult:
            return self._speech_succeeded(attempt, text, logged, raw)

        return await self._serve(candidates, ModelType.TTS, tag, once, succeeded, logged)

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()

    # -- one attempt ------------------------------------------------------------------

    async def _serve(
        self,
        candidates: list[ModelSpec],
        model_type: ModelType,
        tag: CallTag,
        once: Callable[[ModelSpec], Awaitable[_Raw]],
        succeeded: Callable[[_Attempt, _Raw], _Result],
        logged: _Logged,
        worst: Spend = NOTHING,
    ) -> _Result:
        """Within the daily budget, try the candidates in order until one answers; every
        attempt is accounted. One reservation covers every attempt; a failed call is billed
        nothing."""
        budget = self._deps.budget
        held = None
        if budget is not None:
            held = await budget.reserve(
                worst, tag.stream_id, purpose=tag.purpose.value, ambient=tag.purpose in AMBIENT
            )
        plan = self._plan(candidates)
        try:
            for step in plan.steps():
                if isinstance(step, Pause):
                    await self._deps.sleep(step.seconds)
                    continue
                attempt = self._start(step, model_type, tag)
                try:
                    raw = await once(step.spec)
                except Exception as exc:
                    plan.failed(self._attempt_failed(attempt, exc, logged), step.spec.provider)
                    continue
                result = succeeded(attempt, raw)
                if budget is not None and held is not None:
                    budget.settle(held, _spend_of(result))
                return result
            raise plan.exhausted()
        finally:
            if budget is not None and held is not None:
                budget.release(held)  # settled already, or a call that cost nothing

    def _cheaper_first(self, candidates: list[ModelSpec]) -> list[ModelSpec]:
        """Near the day's cap, the owner's cheaper model answers first (when it can answer
        this call at all); the others stay behind it for failover."""
        budget = self._deps.budget
        cheaper = None if budget is None else budget.cheaper_model()
        if cheaper is None or cheaper not in [spec.name for spec in candidates]:
            return candidates
        return sorted(candidates, key=lambda spec: spec.name != cheaper)

    def _timeout_s(self, spec: ModelSpec) -> float:
        return self.catalog.provider(spec.provider).timeout_s

    def _plan(self, candidates: list[ModelSpec]) -> FailoverPlan:
        return FailoverPlan(candidates, self._breaker, self.catalog.breaker, self._deps.monotonic)

    def _start(self, step: Try, model_type: ModelType, tag: CallTag) -> _Attempt:
        return _Attempt(
            step.spec, model_type, tag, step.number, self._deps.wall_clock(), self._deps.monotonic()
        )

    def _chat_succeeded(self, attempt: _Attempt, request: ChatRequest, raw: RawChat) -> ChatResult:
        spec = attempt.spec
        self._breaker.succeeded(spec.name)
        usage = _chat_usage(request, raw)
        cost = spec.pricing.cost(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)
        latency = (self._deps.monotonic() - attempt.started) * 1000
        self._deps.usage(_row(attempt, "ok", usage, cost, latency))
        self._log(
            CallRecord(
                **_record_base(attempt, "ok", latency),
                input_messages=request.messages,  # rendered at once: no copy needed
                tool_names=[_tool_name(tool) for tool in request.tools],
                output_text=raw.text,
                output_tool_calls=[(call.name, call.arguments) for call in raw.tool_calls],
                **_record_usage(usage, cost),
            )
        )
        return ChatResult(
            text=raw.text,
            tool_calls=tuple(parse_tool_call(c.id, c.name, c.arguments) for c in raw.tool_calls),
            finish_reason=raw.finish_reason,
            usage=usage,
            model=spec.name,
            upstream_model=spec.upstream,
            cost=cost,
            latency_ms=latency,
            attempts=attempt.number,
        )

    def _embed_succeeded(
        self, attempt: _Attempt, texts: Sequence[str], raw: RawEmbeddings
    ) -> EmbeddingResult:
        spec = attempt.spec
        self._breaker.succeeded(spec.name)
        if raw.prompt_tokens is None:
            usage = TokenUsage(sum(estimate_tokens(t) for t in texts), estimated=True)
        else:
            usage = TokenUsage(raw.prompt_tokens)
        cost = spec.pricing.cost(usage.prompt_tokens, 0)
        latency = (self._deps.monotonic() - attempt.started) * 1000
        self._deps.usage(_row(attempt, "ok", usage, cost, latency))
        dimension = len(raw.vectors[0]) if raw.vectors else 0
        self._log(
            CallRecord(
                **_record_base(attempt, "ok", latency),
                input_texts=texts,
                output_vectors=(len(raw.vectors), dimension),
                **_record_usage(usage, cost),
            )
        )
        return EmbeddingResult(raw.vectors, usage, spec.name, cost, latency)

    def _transcription_succeeded(
        self, attempt: _Attempt, logged: _Logged, raw: RawTranscription
    ) -> TranscriptionResult:
        spec = attempt.spec
        self._breaker.succeeded(spec.name)
        usage = TokenUsage()
        if raw.usage is not None:
            usage = TokenUsage(raw.usage.prompt_tokens, raw.usage.completion_tokens)
        cost = spec.pricing.cost(usage.prompt_tokens, usage.completion_tokens)
        latency = self._finish_ok(attempt, usage, cost, logged, raw.text)
        return TranscriptionResult(raw.text, spec.name, cost, latency, usage)

    def _speech_succeeded(
        self, attempt: _Attempt, text: str, logged: _Logged, raw: RawSpeech
    ) -> SpeechResult:
        spec = attempt.spec
        self._breaker.succeeded(spec.name)
        # Speech services report no usage; they bill by the input text, so that is counted.
        usage = TokenUsage(estimate_tokens(text), estimated=True)
        cost = spec.pricing.cost(usage.prompt_tokens, 0)
        output = f"[audio {raw.mime}: {len(raw.audio)} bytes]"
        latency = self._finish_ok(attempt, usage, cost, logged, output)
        return SpeechResult(raw.audio, raw.mime, spec.name, cost, latency, usage)

    def _finish_ok(
        self, attempt: _Attempt, usage: TokenUsage, cost: float, logged: _Logged, output: str
    ) -> float:
        """Account and log a successful audio call; returns its latency in ms."""
        latency = (self._deps.monotonic() - attempt.started) * 1000
        self._deps.usage(_row(attempt, "ok", usage, cost, latency))
        self._log(
            CallRecord(
                **_record_base(attempt, "ok", latency),
                input_messages=logged.messages,
                input_texts=logged.texts,
                output_text=output,
                **_record_usage(usage, cost),
            )
        )
        return latency

    def _attempt_failed(
        self, attempt: _Attempt, exc: BaseException, logged: _Logged
    ) -> AttemptFailure:
        """Classify, rest the model if it is worth resting, account and log the failure."""
        kind, detail, retry_after = classify(exc)
        failure = AttemptFailure(attempt.spec.name, kind, detail, retry_after)
        if kind.fails_over:
            self._breaker.failed(attempt.spec.name, self._deps.monotonic(), retry_after)
        latency = (self._deps.monotonic() - attempt.started) * 1000
        self._deps.usage(_row(attempt, kind.value, TokenUsage(), 0.0, latency, error=detail))
        self._log(
            CallRecord(
                **_record_base(attempt, kind.value, latency),
                input_messages=logged.messages,
                input_texts=logged.texts,
                error=detail,
            )
        )
        return failure

    def _log(self, record: CallRecord) -> None:
        try:
            if record.outcome == "ok":
                logger.info(summary_line(record))
            else:
                logger.warning(summary_line(record))
            if self._deps.call_log is not None:
                self._deps.call_log.write(record)
        except Exception as exc:  # a log problem must never surface in a model call
            logger.error("model call not logged: {!r}", exc)

    def _client(self, provider_name: str) -> AsyncOpenAI:
        # Several keys on one provider take turns, call by call.
        provider = self.catalog.provider(provider_name)
        index = next(self._key_turns[provider_name])
        client = self._clients.get((provider_name, index))
        if client is None:
            client = build_client(provider, provider.api_keys[index])
            self._clients[(provider_name, index)] = client
        return client


def _with_model_defaults(request: ChatRequest, spec: ModelSpec) -> ChatRequest:
    if spec.temperature is None and spec.max_tokens is None:
        return request
    return replace(
        request,
        temperature=spec.temperature if request.temperature is None else request.temperature,
        max_tokens=spec.max_tokens if request.max_tokens is None else request.max_tokens,
    )


def _audio_note(filename: str, audio: bytes, language: str | None) -> str:
    # The call log gets what the audio was, never its bytes.
    note = f"[audio {filename}: {len(audio)} bytes"
    return f"{note}, language {language}]" if language else f"{note}]"


def _chat_usage(request: ChatRequest, raw: RawChat) -> TokenUsage:
    if raw.usage is not None:
        return TokenUsage(
            raw.usage.prompt_tokens, raw.usage.completion_tokens, raw.usage.cached_tokens
        )
    output = raw.text + "".join(f"{c.name} {c.arguments}" for c in raw.tool_calls)
    return TokenUsage(message_tokens(request.messages), estimate_tokens(output), estimated=True)


def _row(
    attempt: _Attempt,
    outcome: str,
    usage: TokenUsage,
    cost: float,
    latency_ms: float,
    *,
    error: str = "",
) -> LlmCallRow:
    return LlmCallRow(
        created_at=attempt.started_at,
        purpose=attempt.tag.purpose.value,
        model_type=attempt.model_type.value,
        model=attempt.spec.name,
        upstream_model=attempt.spec.upstream,
        provider=attempt.spec.provider,
        outcome=outcome,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_tokens=usage.cached_tokens,
        usage_estimated=usage.estimated,
        cost=cost,
        latency_ms=latency_ms,
        stream_id=attempt.tag.stream_id,
        turn_id=attempt.tag.turn_id,
        error=error,
        attempt=attempt.number,
    )


def _record_base(attempt: _Attempt, outcome: str, latency_ms: float) -> dict[str, object]:
    return {
        "started_at": attempt.started_at,
        "model": attempt.spec.name,
        "upstream_model": attempt.spec.upstream,
        "model_type": attempt.model_type.value,
        "purpose": attempt.tag.purpose.value,
        "outcome": outcome,
        "duration_ms": latency_ms,
        "stream_key": attempt.tag.stream_key,
        "attempt": attempt.number,
    }


def _record_usage(usage: TokenUsage, cost: float) -> dict[str, object]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
        "usage_estimated": usage.estimated,
        "cost": cost,
    }


def _tool_name(tool: object) -> str:
    if isinstance(tool, dict):
        function = tool.get("function")
        if isinstance(function, dict):
            return str(function.get("name", "?"))
    return "?"


def worst_case(spec: ModelSpec, request: ChatRequest) -> Spend:
    """The most a chat call may cost: its prompt (estimated) and all the output it may write."""
    prompt = message_tokens(request.messages) + estimate_tokens(str(request.tools or ""))
    output = request.max_tokens or spec.max_tokens or DEFAULT_OUTPUT_TOKENS
    return Spend(spec.pricing.cost(prompt, output), prompt + output)


def _spend_of(result: object) -> Spend:
    usage: TokenUsage = getattr(result, "usage", TokenUsage())
    tokens = usage.prompt_tokens + usage.completion_tokens
    return Spend(float(getattr(result, "cost", 0.0)), tokens)
