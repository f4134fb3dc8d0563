"""A store that cannot be used ends `python bot.py` with one sentence, before it serves.

Each case starts the real bot on a real file and reads what a person would read: the exit
code, the sentence naming the file, and no traceback.
"""

from __future__ import annotations

import resource
import signal
import sqlite3
from pathlib import Path

from tests.support.bot_process import BotProcess

# Below the room the start-up probe asks for next to the database (PROBE_FREE_BYTES).
FILE_SIZE_LIMIT = 256 * 1024


def assert_stopped_with(bot: BotProcess, code: int, sentence: str) -> None:
    output = bot.log()
    assert code == 1, output
    lines = [line for line in output.splitlines() if line.startswith("pallas: cannot start")]
    assert lines == [f"pallas: cannot start, {sentence}"], output
    assert "Traceback (most recent call last)" not in output
    assert "Started server process" not in output  # it never served, NapCat never got in


def tables(path: Path) -> set[str]:
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {name for (name,) in rows}
    finally:
        connection.close()


def test_a_corrupted_database_file(tmp_path: Path) -> None:
    bot = BotProcess(tmp_path)
    bot.data_dir.mkdir(parents=True)
    garbage = bytes(range(256)) * 64
    bot.db_path.write_bytes(garbage)
    code = bot.run_to_exit()
    assert_stopped_with(
        bot,
        code,
        f"{bot.db_path} is not a valid database (corrupted): restore it from a backup, or "
        "move it away to start with an empty one",
    )
    assert bot.db_path.read_bytes() == garbage  # left as it was, for whoever restores it


def test_a_database_locked_by_another_process(tmp_path: Path) -> None:
    bot = BotProcess(tmp_path)
    bot.data_dir.mkdir(parents=True)
    holder = sqlite3.connect(bot.db_path, isolation_level=None)
    try:
        holder.execute("CREATE TABLE kept (x INTEGER)")
        holder.execute("BEGIN EXCLUSIVE")
        code = bot.run_to_exit()
    finally:
        holder.close()
    assert_stopped_with(
        bot,
        code,
        f"{bot.db_path} is locked by another process: stop the other Pallas (or the program "
        "holding the file) and start again",
    )
    assert tables(bot.db_path) == {"kept"}


def _file_size_limit() -> None:
    # A file that may not grow acts like a full disk: writes fail (EFBIG) instead of the
    # process being killed by SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


def test_a_full_disk(tmp_path: Path) -> None:
    bot = BotProcess(tmp_path, preexec=_file_size_limit)
    code = bot.run_to_exit()
    assert_stopped_with(
        bot,
        code,
        f"the disk holding {bot.db_path} is full (or a file-size limit is reached): free some "
        "space and start again",
    )
    assert not bot.db_path.exists()
    assert list(bot.data_dir.iterdir()) == []  # the probe's own file is gone too


def test_a_database_from_an_unknown_version(tmp_path: Path) -> None:
    bot = BotProcess(tmp_path)
    bot.data_dir.mkdir(parents=True)
    connection = sqlite3.connect(bot.db_path)
    connection.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
    connection.execute("INSERT INTO alembic_version VALUES ('9999')")
    connection.commit()
    connection.close()
    code = bot.run_to_exit()
    assert_stopped_with(
        bot,
        code,
        f"the schema of {bot.db_path} cannot be brought up to date (No such revision or "
        "branch '9999'), nothing was changed: restore the file from a backup, or run "
        "the Pallas version that last wrote it",
    )
    assert tables(bot.db_path) == {"alembic_version"}


def test_a_migration_that_cannot_run_changes_nothing(tmp_path: Path) -> None:
    # A table of the newest revision is in the way: the revisions before it run first and
    # must be undone with it.
    bot = BotProcess(tmp_path)
    bot.data_dir.mkdir(parents=True)
    connection = sqlite3.connect(bot.db_path)
    connection.execute("CREATE TABLE setting (x INTEGER)")
    connection.commit()
    connection.close()
    code = bot.run_to_exit()
    output = bot.log()
    assert code == 1, output
    assert f"pallas: cannot start, the schema of {bot.db_path} cannot be brought up to date (" in (
        output
    )
    assert "table setting already exists" in output
    assert "Traceback (most recent call last)" not in output
    assert tables(bot.db_path) == {"setting"}
