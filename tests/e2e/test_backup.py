"""End to end, through the real bot and the real commands (docs/deploy.md): a second bot on
the same SQLite file is refused in one sentence; `python -m pallas export`, a wiped data
folder and `python -m pallas import` give back every table and file, into SQLite or into
PostgreSQL (the documented move); a kill -9 in the middle of an export leaves no archive,
one in the middle of an import leaves a store the next import fills."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from tests.support.bot_process import BotProcess
from tests.support.fake_napcat import FakeNapCat, next_message_id
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.timeline_db import TimelineDb, wait_for

SELF_ID = 46_401
GROUP = 7951
SKIPPED_TABLES = {"alembic_version"}


def pallas(bot: BotProcess, *args: str, env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run([sys.executable, "-m", "pallas", *args], cwd=bot.workdir,
                          env={**bot.env(), **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def sqlite_tables(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n: conn.execute(f'SELECT * FROM "{n}" ORDER BY 1, 2').fetchall()
                for n in sorted(names) if n not in SKIPPED_TABLES and not n.startswith("sqlite")}


def folder(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file() and not p.name.startswith("pallas.db")}  # fmt: skip


async def a_bot_with_history(tmp_path: Path) -> BotProcess:
    bot = BotProcess(tmp_path / "bot", token=ACCESS_TOKEN)
    bot.start()
    await bot.wait_ready()
    napcat = FakeNapCat(bot.ws_url, SELF_ID, ACCESS_TOKEN)
    napcat.responders["send_group_msg"] = lambda _p: {"message_id": next_message_id()}
    await napcat.connect()
    for n in range(20):
        await napcat.send_event(napcat.group_message(GROUP, 900 + n % 4, f"第{n}句 ✨"))
    db = TimelineDb(bot.db_path)
    await wait_for(lambda: db.scalar("SELECT count(*) FROM message") >= 20, what="stored")
    await napcat.close()
    (bot.data_dir / "knowledge").mkdir(exist_ok=True)
    (bot.data_dir / "knowledge" / "town.md").write_text("# 镇\n\n紫色的曼陀罗", encoding="utf-8")
    return bot


async def test_a_second_bot_on_one_sqlite_file_is_refused_in_one_sentence(
    tmp_path: Path,
) -> None:
    first = BotProcess(tmp_path, token=ACCESS_TOKEN)
    first.start()
    await first.wait_ready()
    second = BotProcess(tmp_path, token=ACCESS_TOKEN)
    assert second.run_to_exit() == 1
    [said] = [line for line in second.log().splitlines() if "cannot start" in line]
    assert "already used by another running Pallas" in said and "PostgreSQL" in said
    assert (await first.health())["ok"] is True  # the first one is untouched
    assert first.stop() == 0
    again = BotProcess(tmp_path, token=ACCESS_TOKEN)  # once it stopped, a new one starts
    again.start()
    await again.wait_ready()
    again.kill()  # the kernel gives the lock back even after kill -9
    last = BotProcess(tmp_path, token=ACCESS_TOKEN)
    last.start()
    await last.wait_ready()
    assert last.stop() == 0


async def test_export_wipe_import_into_sqlite(tmp_path: Path) -> None:
    bot = await a_bot_with_history(tmp_path)
    archive = tmp_path / "backup.tar.gz"
    exported = pallas(bot, "export", str(archive))  # while it runs: a consistent snapshot
    assert exported.returncode == 0, exported.stderr
    assert bot.stop() == 0
    before_tables, before_files = sqlite_tables(bot.db_path), folder(bot.data_dir)
    assert len(before_tables["message"]) >= 20 and "knowledge/town.md" in before_files

    shutil.rmtree(bot.data_dir)
    imported = pallas(bot, "import", str(archive))
    assert imported.returncode == 0, imported.stderr
    assert "imported" in imported.stdout
    after = sqlite_tables(bot.db_path)
    assert {k: v for k, v in after.items() if k in before_tables} == before_tables
    assert folder(bot.data_dir) == before_files
    refused = pallas(bot, "import", str(archive))
    assert refused.returncode == 2 and "not empty" in refused.stderr

    restarted = BotProcess(bot.workdir, token=ACCESS_TOKEN)  # the imported store serves
    restarted.start()
    await restarted.wait_ready()
    assert restarted.stop() == 0


async def test_the_move_from_sqlite_into_postgresql(tmp_path: Path, postgres_url: str) -> None:
    """The documented move: export from SQLite, import into an empty PostgreSQL database;
    exported again from there, the same rows."""
    bot = await a_bot_with_history(tmp_path)
    assert bot.stop() == 0
    archive = tmp_path / "backup.tar.gz"
    assert pallas(bot, "export", str(archive)).returncode == 0
    before_files, url = folder(bot.data_dir), postgres_url
    moved = pallas(bot, "import", str(archive), env={"PALLAS_DATABASE_URL": url,
                                                      "PALLAS_DATA_DIR": str(tmp_path / "pg")})
    assert moved.returncode == 0, moved.stderr
    assert folder(tmp_path / "pg") == before_files
    again = tmp_path / "again.tar.gz"
    back = pallas(bot, "export", str(again), env={"PALLAS_DATABASE_URL": url,
                                                   "PALLAS_DATA_DIR": str(tmp_path / "pg")})
    assert back.returncode == 0, back.stderr
    assert _rows_of(again) == _rows_of(archive)  # the same rows, read back from PostgreSQL


async def test_kill_9_in_an_export_leaves_no_archive_and_in_an_import_a_store_to_refill(
    tmp_path: Path,
) -> None:
    bot = await a_bot_with_history(tmp_path)
    assert bot.stop() == 0
    (bot.data_dir / "assets").mkdir(exist_ok=True)
    (bot.data_dir / "assets" / "big.bin").write_bytes(os.urandom(48 << 20))  # seconds to pack
    archive = tmp_path / "backup.tar.gz"
    _killed_after(bot, 0.8, "export", str(archive))
    assert not archive.exists()  # only a .part: nothing that looks like a whole backup
    assert pallas(bot, "export", str(archive), timeout=180).returncode == 0
    before_tables, before_files = sqlite_tables(bot.db_path), folder(bot.data_dir)

    shutil.rmtree(bot.data_dir)
    _killed_after(bot, 1.5, "import", str(archive))
    finished = pallas(bot, "import", str(archive), timeout=180)
    assert finished.returncode == 0, finished.stderr
    after = sqlite_tables(bot.db_path)
    assert {k: v for k, v in after.items() if k in before_tables} == before_tables
    assert folder(bot.data_dir) == before_files


def _killed_after(bot: BotProcess, seconds: float, *args: str) -> None:
    process = subprocess.Popen([sys.executable, "-m", "pallas", *args], cwd=bot.workdir,
                               env=bot.env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)  # fmt: skip
    time.sleep(seconds)
    assert process.poll() is None, "it finished before the kill: the test needs more data"
    process.kill()
    process.wait(timeout=10)


def _rows_of(archive: Path) -> dict[str, int]:
    with tarfile.open(archive, "r:gz") as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        return dict(json.loads(member.read())["tables"])
