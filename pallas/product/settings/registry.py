"""The settings registry: every behaviour knob a console page or a chat command may change,
described once as a typed schema with its scope, its storage and when it takes effect.

  Section: a pydantic model (field order = the order a form shows), Chinese titles, a scope
  (global, per group, per bot account), where its values live (always the store), and dynamic
  options for fields whose choices come from the running bot
  registry.read(section, scope_id)    -> the fields with defaults, current values, limits
  registry.update(section, scope_id, changes) -> validated whole (every bad field named),
                                          then stored; nothing is half-saved

`.env` stays for infrastructure only; nothing here is read from a side file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, get_origin, runtime_checkable

from pydantic import BaseModel, ValidationError

from pallas.store.setting_history import SettingHistory


class Scope(StrEnum):
    GLOBAL = "global"
    GROUP = "group"  # one chat (stream id)
    ACCOUNT = "account"  # one bot account (QQ id)


class FieldKind(StrEnum):
    BOOL = "bool"
    INT = "int"
    FLOAT = "float"
    TEXT = "text"
    LONG_TEXT = "long_text"
    LIST = "list"  # of short strings
    CHOICE = "choice"  # one of `options`


@dataclass(frozen=True)
class FieldInfo:
    name: str
    title: str  # Chinese, for forms
    kind: FieldKind
    default: Any
    value: Any
    overridden: bool  # stored for this scope, not the default
    minimum: float | None = None
    maximum: float | None = None
    options: tuple[str, ...] = ()
    help: str = ""


@dataclass(frozen=True)
class SectionValues:
    section: str
    scope_id: str
    fields: tuple[FieldInfo, ...]

    def values(self) -> dict[str, Any]:
        return {f.name: f.value for f in self.fields}


class SettingsStorage(Protocol):
    """Where a section's stored values live (a table of the store)."""

    async def load(self, scope_id: str) -> dict[str, Any]: ...

    async def save(self, scope_id: str, stored: dict[str, Any], now: datetime) -> None: ...


@runtime_checkable
class Restorable(Protocol):
    """A storage whose values act outside the store (the model manager, the agent): applied
    again at every start."""

    async def restore(self) -> None: ...


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    scope: Scope
    model: type[BaseModel]
    defaults: BaseModel
    storage: SettingsStorage
    titles: Mapping[str, str]  # field -> Chinese title; also the fields a form shows
    applies: str = "下一轮生效"  # when a change takes effect
    long_text: frozenset[str] = frozenset()
    helps: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, Callable[[], Sequence[str]]] = field(default_factory=dict)
    # For a section whose values act outside the store: the reader its parts ask where they
    # act (applied.py's `Live`); None for the sections read from the store each time.
    current: Callable[[], Any] | None = None


class SettingsError(ValueError):
    """A change refused, with the fields at fault and why (Chinese, for the owner)."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        self.problems = dict(problems)
        super().__init__("; ".join(f"{name}: {why}" for name, why in self.problems.items()))


class SettingsRegistry:
    def __init__(self, history: SettingHistory | None = None) -> None:
        self._sections: dict[str, Section] = {}
        self._history = history  # every change kept with what it replaced (the replay)

    def register(self, section: Section) -> None:
        if section.key in self._sections:
            raise ValueError(f"settings section {section.key!r} registered twice")
        self._sections[section.key] = section

    def sections(self) -> list[Section]:
        return list(self._sections.values())

    async def restore(self) -> None:
        """At start-up: every section whose values act outside the store applies them."""
        for section in self._sections.values():
            if isinstance(section.storage, Restorable):
                await section.storage.restore()

    def section(self, key: str) -> Section:
        try:
            return self._sections[key]
        except KeyError:
            raise SettingsError({"section": f"没有这一组设置：{key}"}) from None

    async def read(self, key: str, scope_id: str) -> SectionValues:
        section = self.section(key)
        stored = await section.storage.load(scope_id)
        current = merged(section, stored)
        infos = tuple(
            describe(section, name, current.get(name), name in stored) for name in section.titles
        )
        return SectionValues(key, scope_id, infos)

    async def update(
        self, key: str, scope_id: str, changes: Mapping[str, Any], now: datetime
    ) -> SectionValues:
        """Apply `changes` over what is stored, whole or not at all."""
        section = self.section(key)
        unknown = {name: "不是可以改的设置" for name in changes if name not in section.titles}
        if unknown:
            raise SettingsError(unknown)
        stored = await section.storage.load(scope_id)
        checked = validate(section, stored | dict(changes)).model_dump()
        defaults = section.defaults.model_dump()
        # Only what differs from the defaults is kept: a later change of a default applies.
        differs = {name: value for name, value in checked.items() if value != defaults[name]}
        await section.storage.save(scope_id, differs, now)
        if self._history is not None and differs != stored:
            await self._history.record(key, scope_id, dict(stored), differs, now)
        return await self.read(key, scope_id)


def merged(section: Section, stored: Mapping[str, Any]) -> dict[str, Any]:
    return section.defaults.model_dump() | dict(stored)


def validate(section: Section, stored: Mapping[str, Any]) -> BaseModel:
    """The section with `stored` applied, or every field's problem (pure but for the
    dynamic options, which are asked now: a choice must be one the bot has now)."""
    try:
        checked = section.model.model_validate(merged(section, stored))
    except ValidationError as exc:
        problems: dict[str, str] = {}
        for error in exc.errors():
            name = str(error["loc"][0]) if error["loc"] else "section"
            problems.setdefault(name, _chinese(error))
        raise SettingsError(problems) from None
    wrong = {
        name: "不是可选的值"
        for name, options in section.options.items()
        if getattr(checked, name) not in options()
    }
    if wrong:
        raise SettingsError(wrong)
    return checked


def _chinese(error: Mapping[str, Any]) -> str:
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    if kind.startswith(("greater_than", "less_than")):
        bound = next(iter(ctx.values()), "")
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)  # "不能大于 1", not "1.0"
        words = {
            "greater_than": "要大于",
            "greater_than_equal": "不能小于",
            "less_than": "要小于",
            "less_than_equal": "不能大于",
        }
        return f"{words.get(kind, '超出范围')} {bound}"
    if kind in ("int_parsing", "int_from_float", "float_parsing", "bool_parsing"):
        return {"bool_parsing": "要填是或否"}.get(kind, "要填数字")
    message = str(error.get("msg", "不合法"))
    return message.removeprefix("Value error, ")  # a validator's own words (Chinese)


def describe(section: Section, name: str, value: Any, overridden: bool) -> FieldInfo:
    """One field as a form shows it (pure but for dynamic options)."""
    info = section.model.model_fields[name]
    default = getattr(section.defaults, name)
    lower = upper = None
    for rule in info.metadata:
        lower = getattr(rule, "ge", None) if getattr(rule, "ge", None) is not None else lower
        lower = getattr(rule, "gt", None) if getattr(rule, "gt", None) is not None else lower
        upper = getattr(rule, "le", None) if getattr(rule, "le", None) is not None else upper
        upper = getattr(rule, "lt", None) if getattr(rule, "lt", None) is not None else upper
    options = tuple(section.options[name]()) if name in section.options else ()
    return FieldInfo(
        name=name,
        title=section.titles[name],
        kind=_kind(section, name, info.annotation, options),
        default=_plain(default),
        value=_plain(value),
        overridden=overridden,
        minimum=lower,
        maximum=upper,
        options=options,
        help=section.helps.get(name, ""),
    )


def _kind(section: Section, name: str, annotation: Any, options: tuple[str, ...]) -> FieldKind:
    if options:
        return FieldKind.CHOICE
    simple = {bool: FieldKind.BOOL, int: FieldKind.INT, float: FieldKind.FLOAT}
    if annotation in simple:
        return simple[annotation]
    if get_origin(annotation) in (tuple, list):
        return FieldKind.LIST
    return FieldKind.LONG_TEXT if name in section.long_text else FieldKind.TEXT


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
