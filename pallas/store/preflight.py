"""Check the store and bring its schema up to date before anything serves.

`python bot.py` runs `prepare_store` before the server binds: a corrupted or locked file, a
full disk or a migration that cannot run ends start-up with one sentence
(`StoreStartupError`, from pallas/store/failures.py) and nothing half-done.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from sqlalchemy.engine import make_url

from pallas.store.engine import create_engine
from pallas.store.failures import (
    StoreFailure,
    StoreStartupError,
    classify,
    explain,
    short_detail,
)
from pallas.store.migrate import Migrations, upgrade_to_head

# How long the probe waits for another process's write lock (the bot's own busy timeout is
# longer): a Pallas that is still running holds it far longer than this.
PROBE_BUSY_TIMEOUT_S = 2.0
# The room a start needs next to the database: migrations, the WAL, the first messages.
PROBE_FREE_BYTES = 1 << 20
PROBE_FILE = ".pallas-space-probe"
_HELD: dict[Path, BinaryIO] = {}  # the lock files this process holds until it ends

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]


def prepare_store(url: str, branches: Sequence[Migrations] = ()) -> None:
    """Probe the store, then migrate it (with the features' own branches); any failure
    raises StoreStartupError."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        path = Path(parsed.database).expanduser()
        hold_sqlite_file(path, url)  # first: a second Pallas reads nothing of the first's file
        try:
            probe_sqlite_file(path)
        except (OSError, sqlite3.Error) as exc:
            release_sqlite_file(path)  # nothing of this start is left behind
            raise _startup_error(exc, url, migrating=False) from exc
    try:
        asyncio.run(_migrate(url, branches))
    except Exception as exc:
        raise _startup_error(exc, url, migrating=True) from exc


def _startup_error(exc: BaseException, url: str, *, migrating: bool) -> StoreStartupError:
    failure = classify(exc, migrating=migrating)
    return StoreStartupError(failure, explain(failure, url, short_detail(exc)))


def hold_sqlite_file(path: Path, url: str) -> None:
    """Take the file's process lock for the rest of this process's life (the kernel gives it
    back when the process ends, even by kill -9), or refuse: a second Pallas on one SQLite
    file would take the first one's turns, jobs and sends as its own."""
    if fcntl is None:  # no flock (Windows): SQLite's own locking is all there is
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = (path.parent / f"{path.name}.lock").resolve()
    if lock in _HELD:  # this process holds it already (an import, then a check)
        return
    handle = lock.open("a+b")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.close()
        raise StoreStartupError(StoreFailure.IN_USE, explain(StoreFailure.IN_USE, url)) from exc
    _HELD[lock] = handle


def release_sqlite_file(path: Path) -> None:
    lock = (path.parent / f"{path.name}.lock").resolve()
    handle = _HELD.pop(lock, None)
    if handle is not None:
        lock.unlink(missing_ok=True)
        handle.close()


def probe_sqlite_file(path: Path) -> None:
    """The folder takes a write, the file is a sound database, and no other process holds
    its write lock. A missing file is fine (the migrations create it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _probe_free_space(path.parent)
    connection = sqlite3.connect(path, timeout=PROBE_BUSY_TIMEOUT_S, isolation_level=None)
    try:
        problems = [row[0] for row in connection.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            detail = "; ".join(problems[:3])
            raise sqlite3.DatabaseError(f"database disk image is malformed: {detail}")
        connection.execute("BEGIN IMMEDIATE")  # the write lock, taken and given back
        connection.execute("ROLLBACK")
    finally:
        connection.close()


def _probe_free_space(folder: Path) -> None:
    probe = folder / PROBE_FILE
    try:
        with probe.open("wb") as handle:
            handle.write(bytes(PROBE_FREE_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        probe.unlink(missing_ok=True)


async def _migrate(url: str, branches: Sequence[Migrations]) -> None:
    engine = create_engine(url)
    try:
        await upgrade_to_head(engine, branches)
    finally:
        await engine.dispose()
