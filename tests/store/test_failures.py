from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from pallas.store.failures import (
    StoreFailure,
    classify,
    describe_database,
    explain,
    short_detail,
)

URL = "sqlite+aiosqlite:////srv/pallas/data/pallas.db"
PG_URL = "postgresql+asyncpg://pallas:s3cret@db.example:5432/pallas"


def sqlite_error(path: Path, statement: str) -> sqlite3.Error:
    """A real error from the sqlite3 module, with its result code."""
    with pytest.raises(sqlite3.Error) as caught:
        connection = sqlite3.connect(path, timeout=0)
        try:
            connection.execute(statement)
        finally:
            connection.close()
    return caught.value


def test_a_file_that_is_not_a_database_is_corrupted(tmp_path: Path) -> None:
    (tmp_path / "x.db").write_bytes(b"not a database, just bytes " * 100)
    assert classify(sqlite_error(tmp_path / "x.db", "PRAGMA quick_check")) == (
        StoreFailure.CORRUPTED
    )


def test_a_database_held_by_another_connection_is_locked(tmp_path: Path) -> None:
    holder = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        error = sqlite_error(tmp_path / "x.db", "SELECT * FROM t")
    finally:
        holder.close()
    assert classify(error) == StoreFailure.LOCKED


def test_a_wrapped_error_is_classified_by_what_it_wraps(tmp_path: Path) -> None:
    (tmp_path / "x.db").write_bytes(b"garbage " * 1000)
    orig = sqlite_error(tmp_path / "x.db", "SELECT 1 FROM sqlite_master")
    wrapped = OperationalError("SELECT 1", {}, orig)
    assert classify(wrapped) == StoreFailure.CORRUPTED


@pytest.mark.parametrize(
    ("message", "failure"),
    [
        ("database disk image is malformed", StoreFailure.CORRUPTED),
        ("database is locked", StoreFailure.LOCKED),
        ("database or disk is full", StoreFailure.DISK_FULL),
        ("attempt to write a readonly database", StoreFailure.READ_ONLY),
        ("unable to open database file", StoreFailure.READ_ONLY),
        ("disk I/O error", StoreFailure.IO_ERROR),
    ],
)
def test_sqlite_messages_without_a_code(message: str, failure: StoreFailure) -> None:
    assert classify(sqlite3.OperationalError(message)) == failure


@pytest.mark.parametrize(
    ("number", "failure"),
    [
        (errno.ENOSPC, StoreFailure.DISK_FULL),
        (errno.EFBIG, StoreFailure.DISK_FULL),
        (errno.EDQUOT, StoreFailure.DISK_FULL),
        (errno.EACCES, StoreFailure.READ_ONLY),
        (errno.EROFS, StoreFailure.READ_ONLY),
        (errno.ECONNREFUSED, StoreFailure.UNREACHABLE),
    ],
)
def test_os_errors_by_number(number: int, failure: StoreFailure) -> None:
    assert classify(OSError(number, "x")) == failure


def test_an_error_raised_while_handling_another_keeps_the_first_cause() -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("cleanup failed") from None
    except RuntimeError as exc:
        assert classify(exc) == StoreFailure.DISK_FULL  # __context__ survives `from None`


def test_postgres_refusals_by_sqlstate() -> None:
    class InvalidPasswordError(Exception):
        sqlstate = "28P01"

    class InvalidCatalogNameError(Exception):
        sqlstate = "3D000"

    assert classify(InvalidPasswordError("password")) == StoreFailure.REJECTED
    assert classify(InvalidCatalogNameError("no db")) == StoreFailure.REJECTED
    assert classify(ConnectionRefusedError(errno.ECONNREFUSED, "refused")) == (
        StoreFailure.UNREACHABLE
    )
    assert classify(TimeoutError()) == StoreFailure.UNREACHABLE


def test_anything_else_is_a_failed_migration_while_migrating() -> None:
    error = sqlite3.OperationalError("table setting already exists")
    assert classify(error, migrating=True) == StoreFailure.MIGRATION_FAILED
    assert classify(error) == StoreFailure.OTHER
    # A known cause stays itself during a migration.
    assert classify(sqlite3.OperationalError("database is locked"), migrating=True) == (
        StoreFailure.LOCKED
    )


def test_the_database_is_named_by_path_or_by_url_without_password() -> None:
    assert describe_database(URL) == "/srv/pallas/data/pallas.db"
    assert describe_database(PG_URL) == "postgresql+asyncpg://pallas:***@db.example:5432/pallas"
    assert "s3cret" not in explain(StoreFailure.REJECTED, PG_URL, "password")


@pytest.mark.parametrize("failure", list(StoreFailure))
def test_every_failure_has_one_sentence_naming_the_database(failure: StoreFailure) -> None:
    sentence = explain(failure, URL, "some detail")
    assert "/srv/pallas/data/pallas.db" in sentence
    assert "\n" not in sentence
    assert ": " in sentence  # what is wrong, then what to do


def test_the_sentences_say_what_to_do() -> None:
    assert explain(StoreFailure.CORRUPTED, URL) == (
        "/srv/pallas/data/pallas.db is not a valid database (corrupted): restore it from a "
        "backup, or move it away to start with an empty one"
    )
    assert "stop the other Pallas" in explain(StoreFailure.LOCKED, URL)
    assert "is full" in explain(StoreFailure.DISK_FULL, URL)
    assert "nothing was changed" in explain(StoreFailure.MIGRATION_FAILED, URL, "x")


def test_the_detail_is_the_innermost_message_on_one_line() -> None:
    orig = sqlite3.OperationalError("table setting\n already exists")
    wrapped = OperationalError("CREATE TABLE setting", {}, orig)
    assert short_detail(wrapped) == "table setting already exists"
    assert short_detail(RuntimeError("x" * 500)).endswith("...")
