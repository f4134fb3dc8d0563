"""Typed settings, read once at start-up from `.env` and the environment.

A bad value stops start-up with a `ConfigError` that names the key and what is expected.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

DEFAULT_PROVIDERS_FILE = Path("config/providers.yml")

# Friendly aliases accepted for PALLAS_DATABASE_URL, rewritten to the async driver.
_URL_SCHEMES = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "postgres": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
    "postgresql+asyncpg": "postgresql+asyncpg",
}


# What to write, for keys whose validation messages alone are not obvious to an owner.
_EXPECTED = {
    "PORT": "an integer from 1 to 65535",
    "SUPERUSERS": 'a JSON list of QQ ids such as ["12345"]',
    "NICKNAME": 'a JSON list of names such as ["牛牛"]',
    "PALLAS_BLOCKED_USERS": 'a JSON list of QQ ids such as ["12345"]',
    "PALLAS_TRUSTED_PROXIES": 'a JSON list of addresses or networks such as ["127.0.0.1"]',
    "PALLAS_FEATURES_OFF": 'a JSON list of feature names such as ["responders"]',
    "PALLAS_FEATURE_MODULES": 'a JSON list of module paths such as ["my_bot.my_feature"]',
    "PALLAS_ACCOUNT_NAMES": 'a JSON object of QQ ids to names such as {"10002": ["小二"]}',
}


# How long records are kept by default, in days (0: forever), and the bounds of every value,
# in .env and in the console's `retention` section alike (docs/retention.md).
RETENTION_DAYS = {"messages": 180, "events": 90, "model_calls": 90, "call_log": 30}
RETENTION_MAX_DAYS = 3650
# Start-up looks back a day for cut-off turns and ungated messages, and the gate's windows are
# shorter still: a week is the least a store row may be kept.
RETENTION_MIN_STORE_DAYS = 7


class ConfigError(Exception):
    """A configuration value is missing or malformed; the message names the key."""


class Settings(BaseSettings):
    """Every key of the outer contract, typed. Field names are the env keys, lowercased."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
    )

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=1, le=65535)
    onebot_access_token: str = ""
    superusers: list[str] = Field(default_factory=list)
    nickname: list[str] = Field(default_factory=lambda: ["牛牛"])
    # NoneBot's own command keys: what starts a command ("" allowed: no prefix) and what may
    # separate its name from the rest ("/开启.复读") (docs/commands.md).
    command_start: list[str] = Field(default_factory=lambda: ["/"])
    command_sep: list[str] = Field(default_factory=lambda: ["."])
    pallas_blocked_users: list[str] = Field(default_factory=list)  # silenced: recorded only
    # Several accounts (docs/accounts.md): names only one account answers to, and whether a
    # disconnected account's queued replies may go out through another in the same group.
    pallas_account_names: dict[str, list[str]] = Field(default_factory=dict)
    pallas_account_handover: bool = False
    # Several processes on one PostgreSQL store (docs/scaling.md): this process's name, unique
    # and the same across its restarts (empty: host name and port), and how long its lease
    # lasts unrenewed before another process takes over what it left.
    pallas_process_name: str = Field(default="", max_length=64)
    pallas_process_lease_s: float = Field(default=30.0, ge=3.0, le=600.0)
    pallas_data_dir: Path = Path("data")
    pallas_database_url: str = ""
    llm_base_url: str = ""
    llm_api_key: str = ""
    llm_model: str = ""
    pallas_providers_file: Path | None = None
    # Daily caps on model spending (docs/cost.md): in the providers file's currency, and in
    # tokens for owners without prices. Unset: no cap.
    pallas_daily_budget: float | None = Field(default=None, ge=0)
    pallas_daily_token_budget: int | None = Field(default=None, ge=0)
    pallas_console_token: str = ""
    # Features switched off process-wide, by name, and features added by module path
    # (each exports an EXTENSION); docs/architecture.md, "Adding a feature".
    pallas_features_off: list[str] = Field(default_factory=list)
    pallas_feature_modules: list[str] = Field(default_factory=list)
    # Reverse proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (addresses or
    # networks); none by default, so a client is who its socket says (docs/security.md).
    pallas_trusted_proxies: list[str] = Field(default_factory=list)
    pallas_mcp_file: Path | None = None  # MCP servers (docs/mcp.md); None: config/mcp.json
    web_search_api_url: str = ""  # empty: Tavily's own endpoint
    tavily_api_key: str = ""  # empty: web.search is off
    # E-mail for the owners when a private message to them fails (docs/persona.md).
    pallas_smtp_host: str = ""  # empty: no e-mail
    pallas_smtp_port: int = Field(default=587, ge=1, le=65535)
    pallas_smtp_user: str = ""
    pallas_smtp_password: str = Field(default="", repr=False)
    pallas_smtp_from: str = ""
    pallas_smtp_to: list[str] = Field(default_factory=list)
    pallas_smtp_starttls: bool = True
    # How many days rows and files are kept; 0 keeps them forever. The defaults of the
    # console's `retention` section (docs/retention.md).
    pallas_retention_messages_days: int = Field(
        default=RETENTION_DAYS["messages"], ge=0, le=RETENTION_MAX_DAYS
    )
    pallas_retention_events_days: int = Field(
        default=RETENTION_DAYS["events"], ge=0, le=RETENTION_MAX_DAYS
    )
    pallas_retention_model_calls_days: int = Field(
        default=RETENTION_DAYS["model_calls"], ge=0, le=RETENTION_MAX_DAYS
    )
    pallas_retention_call_log_days: int = Field(
        default=RETENTION_DAYS["call_log"], ge=0, le=RETENTION_MAX_DAYS
    )
    # Drills only: the bot's clock moved by this many seconds (pallas/core/clock.py).
    pallas_clock_shift_s: float = Field(default=0.0, ge=-366 * 86400, le=366 * 86400)

    @field_validator("pallas_providers_file", "pallas_mcp_file", "pallas_data_dir", mode="before")
    @classmethod
    def _empty_means_default(cls, value: Any, info: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            return Path("data") if info.field_name == "pallas_data_dir" else None
        return value

    @field_validator("pallas_daily_budget", "pallas_daily_token_budget", mode="before")
    @classmethod
    def _empty_means_no_cap(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("superusers", "pallas_blocked_users", mode="before")
    @classmethod
    def _ids_as_strings(cls, value: Any) -> Any:
        if isinstance(value, list | tuple | set):
            return [str(item) for item in value]
        return value

    @field_validator(
        "pallas_retention_messages_days",
        "pallas_retention_events_days",
        "pallas_retention_model_calls_days",
    )
    @classmethod
    def _a_week_at_least(cls, value: int) -> int:
        if 0 < value < RETENTION_MIN_STORE_DAYS:
            raise ValueError(
                f"expected 0 (keep forever) or at least {RETENTION_MIN_STORE_DAYS} days"
            )
        return value

    @field_validator("pallas_trusted_proxies")
    @classmethod
    def _proxy_addresses(cls, value: list[str]) -> list[str]:
        """Each as uvicorn reads it: an address, or a network in its strict form
        ("10.0.0.1/8" is 10.0.0.0/8; uvicorn would take the loose form for a host name)."""
        read = []
        for item in value:
            try:
                text = item.strip()
                if "/" in text:
                    read.append(str(ipaddress.ip_network(text, strict=False)))
                else:
                    read.append(str(ipaddress.ip_address(text)))
            except ValueError:
                raise ValueError(
                    f'expected IP addresses or networks such as ["127.0.0.1", "10.0.0.0/8"], '
                    f"not {item!r}"
                ) from None
        return read

    @field_validator("command_start")
    @classmethod
    def _some_start(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError('expected at least one command start, such as ["/"]')
        return value

    @field_validator("pallas_account_names")
    @classmethod
    def _account_names(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        cleaned = {}
        for account, names in value.items():
            if not account.strip().isdigit():
                raise ValueError(f"expected QQ ids as keys, got {account!r}")
            kept = [name.strip() for name in names if name.strip()]
            if kept:
                cleaned[account.strip()] = kept
        return cleaned

    @field_validator("nickname")
    @classmethod
    def _names_not_blank(cls, value: list[str]) -> list[str]:
        names = [name.strip() for name in value if name.strip()]
        if not names:
            raise ValueError("expected at least one non-empty name")
        return names

    @field_validator("pallas_database_url")
    @classmethod
    def _async_driver(cls, value: str) -> str:
        if not value:
            return value
        scheme, sep, rest = value.partition("://")
        if not sep or scheme not in _URL_SCHEMES:
            raise ValueError("expected a sqlite+aiosqlite:// or postgresql+asyncpg:// URL")
        return f"{_URL_SCHEMES[scheme]}://{rest}"

    @model_validator(mode="after")
    def _coherent(self) -> Settings:
        if not self.onebot_access_token and not _is_loopback(self.host):
            raise ValueError(
                "ONEBOT_ACCESS_TOKEN: required when HOST is not a loopback address "
                f"(HOST={self.host}); set a shared secret and give it to NapCat"
            )
        quick = {"LLM_BASE_URL": self.llm_base_url, "LLM_MODEL": self.llm_model}
        if any(quick.values()) and not all(quick.values()):
            missing = next(key for key, value in quick.items() if not value)
            raise ValueError(f"{missing}: required when the other LLM_ keys are set")
        return self

    @property
    def database_url(self) -> str:
        """The effective URL: the configured one, else SQLite inside the data dir."""
        if self.pallas_database_url:
            return self.pallas_database_url
        return f"sqlite+aiosqlite:///{(self.pallas_data_dir / 'pallas.db').resolve()}"

    @property
    def providers_file(self) -> Path | None:
        """The providers file in effect, if any."""
        if self.pallas_providers_file is not None:
            return self.pallas_providers_file
        return DEFAULT_PROVIDERS_FILE if DEFAULT_PROVIDERS_FILE.is_file() else None

    @property
    def model_chat_enabled(self) -> bool:
        return bool(self.llm_base_url and self.llm_model) or self.providers_file is not None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_settings(env_file: Path | str | None = ".env", **overrides: Any) -> Settings:
    """Read settings once; raise `ConfigError` with one line per bad key."""
    try:
        return Settings(_env_file=env_file, **overrides)  # type: ignore[call-arg]
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None
    except SettingsError as exc:
        raise ConfigError(_describe_parse_error(exc)) from None


def _describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"]).upper()
        message = str(error["msg"]).removeprefix("Value error, ")
        if key:
            hint = f"; expected {_EXPECTED[key]}" if key in _EXPECTED else ""
            lines.append(f"{key}: {message}{hint} (got {error.get('input')!r})")
        else:
            lines.append(message)
    return "invalid configuration:\n  " + "\n  ".join(lines)


def _describe_parse_error(exc: SettingsError) -> str:
    # pydantic-settings reports list keys that are not JSON as `error parsing value for
    # field "superusers" ...`; keep its text and point at the expected format.
    text = str(exc)
    field = text.split('"')[1] if text.count('"') >= 2 else "?"
    return (
        f"invalid configuration:\n  {field.upper()}: expected "
        f"{_EXPECTED.get(field.upper(), 'valid JSON')} ({text})"
    )
