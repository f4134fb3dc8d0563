"""The MCP servers an owner configured: `config/mcp.json` (or PALLAS_MCP_FILE), in the shape
every MCP host reads, with a few keys of the bot's own beside it (docs/mcp.md).

  {"mcpServers": {
     "town":   {"command": "python", "args": ["town.py"], "env": {"KEY": "…"}},
     "remote": {"url": "https://example.org/mcp", "headers": {"Authorization": "Bearer …"},
                "disabled": false, "groups": ["123456"], "private": true,
                "safe_tools": ["post_notice"], "hints": ["天气"], "timeout_s": 30}}}

Keys other hosts write (`type`, `autoApprove`, …) are ignored. A file that cannot be read is
said in one log line and on the doctor, and the bot runs without MCP.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

DEFAULT_FILE = Path("config/mcp.json")
MAX_SERVERS = 20


class ServerConfig(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = ""  # the key it was listed under
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict, repr=False)  # secrets: never shown
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = Field(default_factory=dict, repr=False)  # secrets: never shown
    disabled: bool = False
    groups: tuple[str, ...] = ()  # only these groups (empty: every group)
    private: bool = True  # private chats too
    safe_tools: tuple[str, ...] = ()  # side-effect tools the owner lets everyone use
    hints: tuple[str, ...] = ()  # words that bring its tools into a turn
    timeout_s: float = Field(default=30.0, gt=0, le=300)

    @field_validator("groups", mode="before")
    @classmethod
    def _numbers_as_text(cls, value: Any) -> Any:
        """Group numbers written as JSON numbers are meant as the same numbers."""
        if isinstance(value, list | tuple):
            return [str(item) if isinstance(item, int) else item for item in value]
        return value

    type: str = ""  # other hosts' word for the transport: only SSE is refused

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if self.type.lower() == "sse":
            raise ValueError("the SSE transport is not supported; use streamable HTTP (url)")
        if bool(self.command) == bool(self.url):
            raise ValueError("give either command (stdio) or url (streamable HTTP)")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"


class McpFileError(ValueError):
    """The file is there but cannot be used; the message says where and why."""


def config_path(configured: Path | None) -> Path:
    return configured if configured is not None else DEFAULT_FILE


def read_servers(path: Path) -> list[ServerConfig]:
    """The servers of the file ([] when there is no file); raises McpFileError."""
    if not path.exists():
        return []
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise McpFileError(f"{path}: not readable JSON ({exc})") from None
    listed = raw.get("mcpServers") if isinstance(raw, dict) else None
    if not isinstance(listed, dict):
        raise McpFileError(f'{path}: expected {{"mcpServers": {{"<name>": {{...}}}}}}')
    if len(listed) > MAX_SERVERS:
        raise McpFileError(f"{path}: {len(listed)} servers; at most {MAX_SERVERS}")
    return [_server(path, str(name), entry) for name, entry in listed.items()]


def _server(path: Path, name: str, entry: Any) -> ServerConfig:
    if not isinstance(entry, dict):
        raise McpFileError(f"{path}: server {name!r} must be an object")
    try:
        return ServerConfig.model_validate({**entry, "name": name})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or name}: {e['msg']}"
                             for e in exc.errors())  # fmt: skip
        raise McpFileError(f"{path}: server {name!r}: {problems}") from None
