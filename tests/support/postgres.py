"""A throwaway PostgreSQL server for the store tests, started from the local binaries.

Set PALLAS_TEST_POSTGRES_URL to use an existing server instead (a database per test is
created in it). Without either, the store tests run on SQLite only.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.bot_process import free_port

SUPERUSER = "pallas"


def postgres_bin_dir() -> Path | None:
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


def postgres_configured() -> bool:
    return bool(os.environ.get("PALLAS_TEST_POSTGRES_URL")) or postgres_bin_dir() is not None


class PostgresServer:
    """initdb + pg_ctl in a temp dir, trust auth on loopback, a free port."""

    def __init__(self) -> None:
        bin_dir = postgres_bin_dir()
        assert bin_dir is not None, "no PostgreSQL binaries found"
        self._bin = bin_dir
        self._root = Path(tempfile.mkdtemp(prefix="pallas-pg-"))
        self._data = self._root / "data"
        self.port = free_port()

    @property
    def admin_url(self) -> str:
        return f"postgresql+asyncpg://{SUPERUSER}@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        command = [str(self._bin / args[0]), *args[1:]]
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            shutil.chown(self._root, "postgres")
            command = ["runuser", "-u", "postgres", "--", *command]
        # No terminal: under `timeout` or CI a child that touches the TTY would be stopped.
        subprocess.run(
            command,
            check=True,
            capture_output=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def start(self) -> PostgresServer:
        self._run("initdb", "-D", str(self._data), "-A", "trust", "-U", SUPERUSER)
        options = f"-p {self.port} -k {self._root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl",
            "-D",
            str(self._data),
            "-o",
            options,
            "-w",
            "-l",
            str(self._root / "server.log"),
            "start",
        )
        return self

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self._data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self._root, ignore_errors=True)
