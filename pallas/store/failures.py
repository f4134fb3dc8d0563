"""Why the store cannot be used at start-up: a closed set of causes, each with one sentence.

`classify` is a pure function of the exception (its chain included); `explain` turns the cause
into the one line a person reads: the database it is about and what to do.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from enum import StrEnum

from sqlalchemy.engine import make_url


class StoreFailure(StrEnum):
    CORRUPTED = "corrupted"
    LOCKED = "locked"
    IN_USE = "in_use"  # another Pallas serves this SQLite file
    DISK_FULL = "disk_full"
    READ_ONLY = "read_only"  # permission denied, or a read-only disk
    IO_ERROR = "io_error"
    MIGRATION_FAILED = "migration_failed"
    UNREACHABLE = "unreachable"  # a database server that does not answer
    REJECTED = "rejected"  # a database server that refuses the login or the database name
    OTHER = "other"


class StoreStartupError(Exception):
    """The store cannot be used; the message is the one sentence to show."""

    def __init__(self, failure: StoreFailure, sentence: str) -> None:
        super().__init__(sentence)
        self.failure = failure


# SQLite's primary result codes (https://sqlite.org/rescode.html).
_SQLITE_CODES = {
    3: StoreFailure.READ_ONLY,  # SQLITE_PERM
    5: StoreFailure.LOCKED,  # SQLITE_BUSY
    6: StoreFailure.LOCKED,  # SQLITE_LOCKED
    8: StoreFailure.READ_ONLY,  # SQLITE_READONLY
    10: StoreFailure.IO_ERROR,  # SQLITE_IOERR
    11: StoreFailure.CORRUPTED,  # SQLITE_CORRUPT
    13: StoreFailure.DISK_FULL,  # SQLITE_FULL
    14: StoreFailure.READ_ONLY,  # SQLITE_CANTOPEN: the file or its folder cannot be opened
    26: StoreFailure.CORRUPTED,  # SQLITE_NOTADB
}
# The same causes by message, for drivers that keep no result code.
_SQLITE_MESSAGES = (
    ("file is not a database", StoreFailure.CORRUPTED),
    ("database disk image is malformed", StoreFailure.CORRUPTED),
    ("database is locked", StoreFailure.LOCKED),
    ("database table is locked", StoreFailure.LOCKED),
    ("database or disk is full", StoreFailure.DISK_FULL),
    ("attempt to write a readonly database", StoreFailure.READ_ONLY),
    ("unable to open database file", StoreFailure.READ_ONLY),
    ("disk i/o error", StoreFailure.IO_ERROR),
)
_ERRNOS = {
    errno.ENOSPC: StoreFailure.DISK_FULL,
    errno.EFBIG: StoreFailure.DISK_FULL,  # a file-size limit, which acts like a full disk
    errno.EDQUOT: StoreFailure.DISK_FULL,
    errno.EACCES: StoreFailure.READ_ONLY,
    errno.EPERM: StoreFailure.READ_ONLY,
    errno.EROFS: StoreFailure.READ_ONLY,
    errno.ECONNREFUSED: StoreFailure.UNREACHABLE,
    errno.EHOSTUNREACH: StoreFailure.UNREACHABLE,
    errno.ENETUNREACH: StoreFailure.UNREACHABLE,
    errno.ETIMEDOUT: StoreFailure.UNREACHABLE,
}
# PostgreSQL's SQLSTATE classes for a refused login (28) or an unknown database (3D).
_REJECTED_SQLSTATES = ("28", "3D")


def classify(exc: BaseException, *, migrating: bool = False) -> StoreFailure:
    """The cause of a store failure; what is not a known cause of its own is a failed
    migration while migrating, else OTHER."""
    for link in _chain(exc):
        found = _classify_one(link)
        if found is not None:
            return found
    return StoreFailure.MIGRATION_FAILED if migrating else StoreFailure.OTHER


def _classify_one(exc: BaseException) -> StoreFailure | None:
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)  # absent when raised by hand
        if isinstance(code, int) and code & 0xFF in _SQLITE_CODES:
            return _SQLITE_CODES[code & 0xFF]
        return _by_message(str(exc))
    sqlstate = getattr(exc, "sqlstate", None)  # asyncpg's errors, without importing asyncpg
    if isinstance(sqlstate, str) and sqlstate.startswith(_REJECTED_SQLSTATES):
        return StoreFailure.REJECTED
    if isinstance(exc, OSError):
        if exc.errno in _ERRNOS:
            return _ERRNOS[exc.errno]
        if isinstance(exc, ConnectionError | TimeoutError) or exc.errno is None:
            return StoreFailure.UNREACHABLE  # refused, reset, or a host name that resolves not
    if isinstance(exc, TimeoutError):
        return StoreFailure.UNREACHABLE
    return None


def _by_message(message: str) -> StoreFailure | None:
    lowered = message.lower()
    for needle, failure in _SQLITE_MESSAGES:
        if needle in lowered:
            return failure
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, what a SQLAlchemy error wraps (`orig`), then its causes and contexts."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        link = todo.pop(0)
        if id(link) in seen:
            continue
        seen.add(id(link))
        yield link
        orig = getattr(link, "orig", None)
        todo.extend(e for e in (orig, link.__cause__, link.__context__) if e is not None)


def describe_database(url: str) -> str:
    """The SQLite file's path, or the server's URL with the password hidden."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return parsed.database or ":memory:"
    return parsed.render_as_string(hide_password=True)


def explain(failure: StoreFailure, url: str, detail: str = "") -> str:
    """The one sentence for a failure: which database, what is wrong, what to do."""
    db = describe_database(url)
    why = f" ({detail})" if detail else ""
    match failure:
        case StoreFailure.CORRUPTED:
            return (
                f"{db} is not a valid database (corrupted): restore it from a backup, or move it "
                "away to start with an empty one"
            )
        case StoreFailure.LOCKED:
            return (
                f"{db} is locked by another process: stop the other Pallas (or the program "
                "holding the file) and start again"
            )
        case StoreFailure.IN_USE:
            return (
                f"{db} is already used by another running Pallas, and one SQLite file serves "
                "one process: stop that one, or move to PostgreSQL (PALLAS_DATABASE_URL) to "
                "run several"
            )
        case StoreFailure.DISK_FULL:
            return (
                f"the disk holding {db} is full (or a file-size limit is reached): free some "
                "space and start again"
            )
        case StoreFailure.READ_ONLY:
            return (
                f"{db} cannot be written (permission denied or a read-only disk): give the user "
                "running Pallas write access to the file and its folder"
            )
        case StoreFailure.IO_ERROR:
            return (
                f"{db} cannot be read or written (disk I/O error){why}: check the disk, then "
                "restore the file from a backup if the error stays"
            )
        case StoreFailure.MIGRATION_FAILED:
            return (
                f"the schema of {db} cannot be brought up to date{why}, nothing was changed: "
                "restore the file from a backup, or run the Pallas version that last wrote it"
            )
        case StoreFailure.UNREACHABLE:
            return (
                f"the database server at {db} cannot be reached{why}: start it, or correct the "
                "host and port in PALLAS_DATABASE_URL"
            )
        case StoreFailure.REJECTED:
            return (
                f"the database server at {db} refused the connection{why}: check the user, "
                "password and database name in PALLAS_DATABASE_URL"
            )
        case _:
            return (
                f"{db} cannot be used{why}: check PALLAS_DATABASE_URL and PALLAS_DATA_DIR (the "
                "traceback above has the details)"
            )


def short_detail(exc: BaseException) -> str:
    """The innermost message in one line, for the sentence's parenthesis."""
    last = exc
    for link in _chain(exc):
        last = link if str(link) else last
        if isinstance(link, sqlite3.Error) or getattr(link, "sqlstate", None):
            last = link
            break
    text = " ".join(str(last).split()) or type(last).__name__
    return text if len(text) <= 160 else text[:157] + "..."
