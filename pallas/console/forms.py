"""Reading an HTML form into typed settings values (pure): a checkbox left unticked is
false, a list is one item per line, a number must read as one; every bad field is named."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

from pallas.product.settings.registry import FieldInfo, FieldKind

MAX_FIELD_CHARS = 4_000


class FormError(ValueError):
    def __init__(self, problems: Mapping[str, str]) -> None:
        self.problems = dict(problems)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.problems.items()))


def read_form(body: bytes) -> dict[str, list[str]]:
    """An urlencoded body; undecodable bytes are replaced, never raised."""
    return parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)


def field_value(info: FieldInfo, form: Mapping[str, list[str]]) -> Any:
    raw = form.get(info.name, [""])[-1]
    if len(raw) > MAX_FIELD_CHARS:
        raise FormError({info.name: f"太长了（最多 {MAX_FIELD_CHARS} 字）"})
    if info.kind is FieldKind.BOOL:
        return raw in ("on", "true", "1")
    if info.kind in (FieldKind.INT, FieldKind.FLOAT):
        return _number(info, raw.strip())
    if info.kind is FieldKind.LIST:
        return [line.strip() for line in raw.splitlines() if line.strip()]
    if info.kind is FieldKind.CHOICE and raw not in info.options:
        raise FormError({info.name: "不是可选的值"})
    return raw.strip()


def _number(info: FieldInfo, raw: str) -> int | float:
    try:
        return int(raw) if info.kind is FieldKind.INT else float(raw)
    except ValueError:
        raise FormError({info.name: "要填数字"}) from None
