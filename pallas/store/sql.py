"""Small SQL helpers that hide the few differences between SQLite and PostgreSQL."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Generic, TypeVar

from sqlalchemy import Table
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.dml import Insert

K = TypeVar("K")
V = TypeVar("V")


def insert_ignoring_conflicts(conn: AsyncConnection, table: Table) -> Insert:
    """INSERT ... ON CONFLICT DO NOTHING, in the connection's dialect."""
    if conn.dialect.name == "postgresql":
        return pg_insert(table).on_conflict_do_nothing()
    if conn.dialect.name == "sqlite":
        return sqlite_insert(table).on_conflict_do_nothing()
    raise RuntimeError(f"unsupported database backend: {conn.dialect.name}")


async def fetch_rows(conn: AsyncConnection, query: Executable) -> list[tuple[Any, ...]]:
    """Every row of a read, as plain tuples with no result types applied: for reads of many
    rows of ids, text, numbers and blobs. On SQLite the statement runs and is fetched in one
    hand-off to the driver's thread; SQLAlchemy's async cursor takes several (execute, fetch,
    close), each costing more on a busy loop than the query itself."""
    if conn.dialect.name != "sqlite":
        return [tuple(row) for row in await conn.execute(query)]
    compiled = query.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = tuple(compiled.params[name] for name in compiled.positiontup or ())
    raw = await conn.get_raw_connection()
    rows = await raw.driver_connection.execute_fetchall(str(compiled), params)
    return [tuple(row) for row in rows]


def upsert(conn: AsyncConnection, table: Table, key: list[str], values: dict[str, Any]) -> Insert:
    """INSERT ... ON CONFLICT (key) DO UPDATE SET the non-key values."""
    stmt = pg_insert(table) if conn.dialect.name == "postgresql" else sqlite_insert(table)
    changed = {name: value for name, value in values.items() if name not in key}
    return stmt.values(**values).on_conflict_do_update(index_elements=key, set_=changed)


class BoundedCache(Generic[K, V]):
    """A least-recently-used map with a size bound; always rebuildable from the store."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put_all(self, items: dict[K, V]) -> None:
        for key, value in items.items():
            self._items[key] = value
            self._items.move_to_end(key)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)

    def discard(self, key: K) -> None:
        self._items.pop(key, None)

    def __len__(self) -> int:
        return len(self._items)
