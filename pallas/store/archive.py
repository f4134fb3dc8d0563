"""The backup archive's format (docs/deploy.md, "Backup, restore, move"): one gzip'd tar with

  manifest.json            format, the schema revisions, when, from which backend, each
                           table's row count, each file's size and SHA-256
  tables/<table>.jsonl     every row of every table, one JSON object a line
  files/<path>             every file the bot wrote under PALLAS_DATA_DIR

Values are written by their column's declared type, so an archive from SQLite restores into
PostgreSQL and back: times as ISO 8601 with their offset, bytes as base64, JSON as JSON.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

from sqlalchemy import JSON, Column, DateTime, LargeBinary
from sqlalchemy.types import TypeDecorator

FORMAT = 1
MANIFEST = "manifest.json"
TABLES = "tables/"
FILES = "files/"


class ArchiveError(Exception):
    """An archive that cannot be used, or a store it cannot go into; the message says why
    in one sentence (English, for the command line and the log)."""


@dataclass
class Manifest:
    format: int
    revisions: list[str]  # the store's Alembic heads when it was written
    created_at: str
    backend: str
    tables: dict[str, int] = field(default_factory=dict)  # rows per table
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> size, sha256

    def to_json(self) -> bytes:
        return json.dumps(self.__dict__, ensure_ascii=False, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        try:
            raw = json.loads(data)
            return cls(int(raw["format"]), list(raw["revisions"]), str(raw["created_at"]),
                       str(raw["backend"]), dict(raw["tables"]), dict(raw["files"]))  # fmt: skip
        except (ValueError, KeyError, TypeError) as exc:
            raise ArchiveError(f"the archive's manifest is unreadable ({exc})") from exc


def _kind(column: Column[Any]) -> str:
    kind = column.type
    if isinstance(kind, TypeDecorator):
        kind = kind.impl if not isinstance(kind.impl, type) else kind.impl()
    if isinstance(kind, DateTime):
        return "time"
    if isinstance(kind, LargeBinary):
        return "bytes"
    if isinstance(kind, JSON):
        return "json"
    return "plain"


def encode_row(columns: list[Column[Any]], row: Any) -> dict[str, Any]:
    """A row as JSON-ready values, by each column's declared type."""
    out: dict[str, Any] = {}
    for column in columns:
        value = row[column.name]
        if value is None:
            out[column.name] = None
        elif _kind(column) == "time":
            out[column.name] = value.isoformat()
        elif _kind(column) == "bytes":
            out[column.name] = base64.b64encode(bytes(value)).decode()
        else:
            out[column.name] = value
    return out


def decode_row(
    columns: dict[str, Column[Any]], item: dict[str, Any], wanted: set[str]
) -> dict[str, Any]:
    """A JSON line back into values for an insert, for the columns the store has (`wanted`):
    by the model's column type where it knows the column, as written where it does not. A
    column the archive lacks is left to the store's default (or refused by the store)."""
    out: dict[str, Any] = {}
    for name, value in item.items():
        if name not in wanted:
            continue  # a column dropped since the archive was written
        kind = _kind(columns[name]) if name in columns else "plain"
        if value is None or kind in ("json", "plain"):
            out[name] = value
        elif kind == "time":
            out[name] = datetime.fromisoformat(value)
        else:
            out[name] = base64.b64decode(value)
    return out


def safe_member_path(name: str) -> PurePosixPath:
    """A file's path inside the data folder, from an archive member's name; nothing that
    could land outside the folder (absolute, `..`, empty)."""
    path = PurePosixPath(name)
    if path.is_absolute() or not path.parts or any(p in ("..", "") for p in path.parts):
        raise ArchiveError(f"the archive names a file outside the data folder: {name[:100]!r}")
    return path
