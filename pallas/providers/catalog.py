"""What models exist: providers, their keys, and the models registered on them.

A model is known by its registered name (the owner's label, stable across upstream renames);
the upstream id is what the provider's API calls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

MILLION = 1_000_000


class ModelType(StrEnum):
    CHAT = "chat"
    TOOL = "tool"
    VISION = "vision"
    EMBEDDING = "embedding"
    TTS = "tts"
    ASR = "asr"


# Vectors from different models live in different spaces: these types never spread load.
DETERMINISTIC_TYPES = frozenset({ModelType.EMBEDDING})


@dataclass(frozen=True)
class Pricing:
    """Prices per million tokens, in whatever currency the owner bills in."""

    input: float = 0.0
    output: float = 0.0
    cache_hit: float | None = None  # None: cache hits cost the input price

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        # A cache hit is part of the input, never charged on top of it.
        cached = max(0, min(cached_tokens, prompt_tokens))
        hit_price = self.input if self.cache_hit is None else self.cache_hit
        return (
            (prompt_tokens - cached) * self.input
            + cached * hit_price
            + completion_tokens * self.output
        ) / MILLION


@dataclass(frozen=True)
class ProviderSpec:
    name: str
    base_url: str
    api_keys: tuple[str, ...]
    headers: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 60.0


@dataclass(frozen=True)
class ModelSpec:
    name: str
    upstream: str
    provider: str
    types: frozenset[ModelType]
    temperature: float | None = None
    max_tokens: int | None = None
    tool_calling: bool = True
    stream: bool = False
    pricing: Pricing = field(default_factory=Pricing)


@dataclass(frozen=True)
class BreakerPolicy:
    """How a model that keeps failing is rested, and how long a call waits for a 429."""

    failures_to_open: int = 3
    cooldown_s: float = 30.0
    max_retry_after_s: float = 300.0
    # A 429 whose Retry-After is this short is waited out once when no other model is left.
    max_wait_s: float = 3.0


@dataclass(frozen=True)
class Catalog:
    providers: tuple[ProviderSpec, ...] = ()
    models: tuple[ModelSpec, ...] = ()
    preferred: tuple[tuple[ModelType, str], ...] = ()
    breaker: BreakerPolicy = field(default_factory=BreakerPolicy)
    source: str = ""

    def provider(self, name: str) -> ProviderSpec:
        return next(p for p in self.providers if p.name == name)

    def model(self, name: str) -> ModelSpec | None:
        return next((m for m in self.models if m.name == name), None)

    def of_type(self, model_type: ModelType) -> tuple[ModelSpec, ...]:
        """Models registered for the type, in registration order."""
        return tuple(m for m in self.models if model_type in m.types)

    def preferred_for(self, model_type: ModelType) -> str | None:
        return dict(self.preferred).get(model_type)

    @property
    def empty(self) -> bool:
        return not self.models
