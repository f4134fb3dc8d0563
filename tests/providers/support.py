"""Building managers against the fake model server."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from random import Random

from pallas.providers.catalog import (
    BreakerPolicy,
    Catalog,
    ModelSpec,
    ModelType,
    Pricing,
    ProviderSpec,
)
from pallas.providers.manager import ManagerDeps, ModelManager
from pallas.providers.openai_wire import ChatRequest
from pallas.store.llm_usage import LlmCallRow
from tests.support.fake_llm import FakeModelServer

HELLO = ChatRequest(messages=[{"role": "user", "content": "你好"}])


@dataclass
class FakeClock:
    now: float = 1_000.0
    slept: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def model(
    name: str,
    *types: ModelType,
    provider: str = "p",
    pricing: Pricing | None = None,
    tool_calling: bool = True,
    stream: bool = False,
) -> ModelSpec:
    return ModelSpec(
        name=name,
        upstream=f"up-{name}",
        provider=provider,
        types=frozenset(types or (ModelType.CHAT,)),
        tool_calling=tool_calling,
        stream=stream,
        pricing=pricing or Pricing(),
    )


def catalog(
    server: FakeModelServer,
    models: Sequence[ModelSpec],
    *,
    keys: tuple[str, ...] = ("sk-1",),
    timeout_s: float = 5.0,
    preferred: tuple[tuple[ModelType, str], ...] = (),
    breaker: BreakerPolicy | None = None,
    extra_providers: Sequence[ProviderSpec] = (),
) -> Catalog:
    provider = ProviderSpec("p", server.base_url, keys, (("X-Test", "yes"),), timeout_s)
    return Catalog(
        providers=(provider, *extra_providers),
        models=tuple(models),
        preferred=preferred,
        breaker=breaker or BreakerPolicy(),
    )


@dataclass
class Harness:
    manager: ModelManager
    rows: list[LlmCallRow]
    clock: FakeClock


def harness(catalog_: Catalog, *, seed: int = 1, clock: FakeClock | None = None) -> Harness:
    rows: list[LlmCallRow] = []
    clock = clock or FakeClock()
    deps = ManagerDeps(usage=rows.append, monotonic=clock, rng=Random(seed), sleep=clock.sleep)
    return Harness(ModelManager(catalog_, deps), rows, clock)
