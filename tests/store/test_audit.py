"""One audit vocabulary: every event kind comes from `EventKind` and is documented."""

from __future__ import annotations

import ast
from pathlib import Path

from pallas.store.audit import EventKind

ROOT = Path(__file__).resolve().parents[2]
EVENT_WRITERS = {"LedgerEvent", "_event"}


def _kind_literals(path: Path) -> list[str]:
    """String literals passed as the kind of an event, positionally or as `kind=`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        if name not in EVENT_WRITERS:
            continue
        candidates = [kw.value for kw in node.keywords if kw.arg == "kind"]
        candidates += node.args[:2]  # `_event(turn, kind, ...)` or `LedgerEvent(kind, ...)`
        found += [
            f"{path.relative_to(ROOT)}:{node.lineno}: {arg.value!r}"
            for arg in candidates
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
        ]
    return found


def test_events_are_written_with_the_enum_never_a_bare_string() -> None:
    sources = [p for p in (ROOT / "pallas").rglob("*.py") if "migrations" not in p.parts]
    literals = [hit for path in sources for hit in _kind_literals(path)]
    assert literals == []


def test_every_kind_is_documented_in_the_architecture_page() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [kind.value for kind in EventKind if f"`{kind.value}`" not in page]
    assert missing == []
