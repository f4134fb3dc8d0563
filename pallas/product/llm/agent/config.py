"""The agent's knobs: persona and style, budgets, split mode, the fallback line.

Read once at start-up from `config/agent.yml` when the file exists; every field has a safe
default, so the file is optional. A mistake stops start-up naming the file and the field.
Features own their keys of the same file (`memory:`, `media:`, `rage:`...): each declares
them as its `Extension.config` model, and the keys the core does not know are theirs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pallas.config import ConfigError

DEFAULT_AGENT_FILE = Path("config/agent.yml")
Model = TypeVar("Model", bound=BaseModel)

DEFAULT_DESCRIPTION = "你是这个群里的老成员，性格随和，有点懒散，偶尔嘴贫，但不刻薄。"
DEFAULT_STYLE = "说话简短口语化，一般一两句；不用敬语，不用表情符号堆砌，不爱长篇大论。"


class AgentFileError(ConfigError):
    """The agent file cannot be used; the message says where and why."""


class CharacterConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""  # empty: the first of NICKNAME
    description: str = DEFAULT_DESCRIPTION
    style: str = DEFAULT_STYLE


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    persona: CharacterConfig = Field(default_factory=CharacterConfig)
    # A planner call decides, a second call (the chat model) writes the text. Only takes
    # effect when both a `tool` and a `chat` model are registered.
    split_reply: bool = False
    # Sent when a turn that must be answered finds no model able to answer; empty: say nothing.
    fallback_reply: str = ""
    context_token_budget: int = Field(default=3000, ge=200, le=100_000)
    max_bubbles: int = Field(default=4, ge=1, le=10)
    reply_max_chars: int = Field(default=600, ge=20, le=5000)
    tool_call_budget: int = Field(default=3, ge=0, le=8)
    max_rounds: int = Field(default=5, ge=2, le=10)


class AgentFile:
    """The file's mapping, read once: the core's part and each feature's part of it."""

    def __init__(self, raw: Mapping[str, Any], path: Path) -> None:
        self._raw = dict(raw)
        self.path = path

    @classmethod
    def read(cls, path: Path | None = None) -> AgentFile:
        """The file at `path` (config/agent.yml), or an empty one when there is none."""
        path = path or DEFAULT_AGENT_FILE
        if not path.is_file():
            return cls({}, path)
        try:
            raw: Any = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise AgentFileError(f"{path}: cannot read the agent file ({exc})") from None
        if not isinstance(raw, dict):
            raise AgentFileError(f"{path}: expected a mapping of settings")
        return cls(raw, path)

    def core(self, owned: Iterable[type[BaseModel]] = ()) -> AgentConfig:
        """The core's keys; a key some feature's model declares is that feature's."""
        theirs = {key for model in owned for key in model.model_fields}
        return self._validate(AgentConfig, {k: v for k, v in self._raw.items() if k not in theirs})

    def part(self, model: type[Model]) -> Model:
        """A feature's keys, validated by its own model."""
        return self._validate(
            model, {k: v for k, v in self._raw.items() if k in model.model_fields}
        )

    def _validate(self, model: type[Model], raw: dict[str, Any]) -> Model:
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            lines = [
                f"  field {'.'.join(str(p) for p in e['loc'])!r}: {e['msg']}" for e in exc.errors()
            ]
            message = f"{self.path}: invalid agent file\n" + "\n".join(lines)
            raise AgentFileError(message) from None


def load_agent_config(
    path: Path | None = None, owned: Iterable[type[BaseModel]] = ()
) -> AgentConfig:
    """The core's settings of the file, or the defaults when there is no file."""
    return AgentFile.read(path).core(owned)
