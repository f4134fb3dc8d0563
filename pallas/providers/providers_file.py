"""Reading the model configuration: the quick `LLM_*` keys and the YAML providers file.

Every mistake is reported with the file, the provider or model, and the field, so an owner
can fix it without reading code. Unknown fields are errors: a typo must not silently drop
a setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pallas.config import ConfigError, Settings
from pallas.providers.catalog import (
    BreakerPolicy,
    Catalog,
    ModelSpec,
    ModelType,
    Pricing,
    ProviderSpec,
)

QUICK_PROVIDER = "quick"
_TYPE_NAMES = ", ".join(t.value for t in ModelType)


class ProvidersFileError(ConfigError):
    """The providers file cannot be used; the message says where and why."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _PriceEntry(_Strict):
    input: float = Field(default=0.0, ge=0)
    output: float = Field(default=0.0, ge=0)
    cache_hit: float | None = Field(default=None, ge=0)


class _ModelEntry(_Strict):
    name: str = ""
    model: str = Field(min_length=1)
    types: list[ModelType] = Field(min_length=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    tool_calling: bool = True
    stream: bool = False
    price: _PriceEntry = Field(default_factory=_PriceEntry)

    @model_validator(mode="before")
    @classmethod
    def _type_alias(cls, data: Any) -> Any:
        # `type: chat` and `type: [chat, tool]` are accepted as spellings of `types`.
        if isinstance(data, dict) and "type" in data and "types" not in data:
            data = {**data, "types": data["type"]}
            del data["type"]
        if isinstance(data, dict) and isinstance(data.get("types"), str):
            data = {**data, "types": [data["types"]]}
        return data


class _ProviderEntry(_Strict):
    name: str = Field(min_length=1)
    base_url: str = Field(min_length=1)
    api_key: str = ""
    api_keys: list[str] = Field(default_factory=list)
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(default=60.0, gt=0, le=600)
    models: list[_ModelEntry] = Field(default_factory=list)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("expected an http:// or https:// URL ending in the API root (…/v1)")
        return value.rstrip("/")


class _BreakerEntry(_Strict):
    failures: int = Field(default=3, ge=1)
    cooldown: float = Field(default=30.0, ge=0)


class _ProvidersDocument(_Strict):
    providers: list[_ProviderEntry] = Field(min_length=1)
    preferred: dict[ModelType, str] = Field(default_factory=dict)
    circuit_breaker: _BreakerEntry = Field(default_factory=_BreakerEntry)


def load_catalog(settings: Settings) -> Catalog:
    """The models in effect: the providers file (if any), with the quick model first."""
    providers: list[ProviderSpec] = []
    models: list[ModelSpec] = []
    if settings.llm_base_url and settings.llm_model:
        quick_provider, quick_model = quick_entries(
            settings.llm_base_url, settings.llm_api_key, settings.llm_model
        )
        providers.append(quick_provider)
        models.append(quick_model)
    path = settings.providers_file
    if path is None:
        return Catalog(tuple(providers), tuple(models), source="LLM_* keys")
    from_file = read_providers_file(path)
    return Catalog(
        providers=(*providers, *from_file.providers),
        models=_unique(path, [*models, *from_file.models]),
        preferred=from_file.preferred,
        breaker=from_file.breaker,
        source=str(path),
    )


def quick_entries(base_url: str, api_key: str, model: str) -> tuple[ProviderSpec, ModelSpec]:
    provider = ProviderSpec(QUICK_PROVIDER, base_url.rstrip("/"), (api_key,))
    spec = ModelSpec(
        name=model,
        upstream=model,
        provider=QUICK_PROVIDER,
        types=frozenset({ModelType.CHAT, ModelType.TOOL}),
    )
    return provider, spec


def read_providers_file(path: Path) -> Catalog:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProvidersFileError(f"{path}: cannot read the providers file ({exc})") from None
    except yaml.YAMLError as exc:
        raise ProvidersFileError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(raw, dict):
        raise ProvidersFileError(f"{path}: expected a mapping with a `providers:` list")
    try:
        document = _ProvidersDocument.model_validate(raw)
    except ValidationError as exc:
        raise ProvidersFileError(_describe(path, raw, exc)) from None
    return _to_catalog(path, document)


def _to_catalog(path: Path, document: _ProvidersDocument) -> Catalog:
    providers, models = [], []
    for entry in document.providers:
        keys = tuple(k for k in (entry.api_key, *entry.api_keys) if k) or ("",)
        headers = tuple(entry.headers.items())
        providers.append(ProviderSpec(entry.name, entry.base_url, keys, headers, entry.timeout))
        models.extend(_model_spec(entry.name, model) for model in entry.models)
    _check_unique_providers(path, providers)
    models = _unique(path, models)
    for model_type, name in document.preferred.items():
        if not any(m.name == name and model_type in m.types for m in models):
            raise ProvidersFileError(
                f"{path}: preferred.{model_type.value}: no model named {name!r} "
                f"has type {model_type.value}"
            )
    breaker = BreakerPolicy(
        failures_to_open=document.circuit_breaker.failures,
        cooldown_s=document.circuit_breaker.cooldown,
    )
    return Catalog(
        tuple(providers), tuple(models), tuple(document.preferred.items()), breaker, str(path)
    )


def _model_spec(provider: str, entry: _ModelEntry) -> ModelSpec:
    return ModelSpec(
        name=entry.name or f"{provider}/{entry.model}",
        upstream=entry.model,
        provider=provider,
        types=frozenset(entry.types),
        temperature=entry.temperature,
        max_tokens=entry.max_tokens,
        tool_calling=entry.tool_calling,
        stream=entry.stream,
        pricing=Pricing(entry.price.input, entry.price.output, entry.price.cache_hit),
    )


def _check_unique_providers(path: Path, providers: list[ProviderSpec]) -> None:
    seen: set[str] = set()
    for provider in providers:
        if provider.name in seen or provider.name == QUICK_PROVIDER:
            raise ProvidersFileError(
                f"{path}: provider name {provider.name!r} is used twice or reserved"
            )
        seen.add(provider.name)


def _unique(path: Path, models: list[ModelSpec]) -> tuple[ModelSpec, ...]:
    seen: set[str] = set()
    for model in models:
        if model.name in seen:
            raise ProvidersFileError(
                f"{path}: model name {model.name!r} is registered twice; give one a `name:`"
            )
        seen.add(model.name)
    return tuple(models)


def _describe(path: Path, raw: dict[str, Any], exc: ValidationError) -> str:
    lines = [f"{path}: invalid providers file"]
    for error in exc.errors():
        where, field_name = _locate(raw, error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        if field_name == "types":
            message = f"{message}; list one or more of: {_TYPE_NAMES}"
        lines.append(f"  {where}: field {field_name!r}: {message}")
    return "\n".join(lines)


def _locate(raw: dict[str, Any], loc: tuple[Any, ...]) -> tuple[str, str]:
    """Name the provider/model an error belongs to, and the field, from a pydantic loc."""
    parts = [str(p) for p in loc]
    if len(parts) >= 4 and parts[0] == "providers" and parts[2] == "models":
        provider = _entry_name(raw, "providers", int(parts[1]), f"providers[{parts[1]}]")
        models = raw["providers"][int(parts[1])].get("models") or []
        model = models[int(parts[3])] if int(parts[3]) < len(models) else {}
        label = model.get("name") or model.get("model") if isinstance(model, dict) else None
        field_name = ".".join(parts[4:]) or "(the entry)"
        return f"provider {provider!r}, model {label or '#' + str(int(parts[3]) + 1)!r}", field_name
    if len(parts) >= 2 and parts[0] == "providers":
        provider = _entry_name(raw, "providers", int(parts[1]), f"providers[{parts[1]}]")
        return f"provider {provider!r}", ".".join(parts[2:]) or "(the entry)"
    return "top level", ".".join(parts)


def _entry_name(raw: dict[str, Any], key: str, index: int, fallback: str) -> str:
    try:
        entry = raw[key][index]
    except (KeyError, IndexError, TypeError):
        return fallback
    return str(entry.get("name") or fallback) if isinstance(entry, dict) else fallback
