"""Run the real bot (`python bot.py`) in a child process, as a user would."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]
# Start-up (imports, migrations, plugins) takes a few seconds alone and many times that on a
# machine busy with the rest of the suite; a bot that exits instead fails at once.
READY_TIMEOUT_S = 90.0
# A test sends faster than any group would: the account pacing a real QQ account needs
# (docs/delivery.md) would hold its replies back for minutes. So the rig's bots are set the
# way an owner testing on a private account would set them, through the console's API, once
# ready; a test of the pacing itself passes `pacing=None` or its own.
RIG_PACING: dict[str, Any] = {
    "account_per_minute": 0,
    "account_per_hour": 0,
    "new_group_per_hour": 0,
    "same_text_hold_s": 0,
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class BotProcess:
    """The bot with its own data dir and port; its working dir holds no `.env`."""

    def __init__(
        self,
        workdir: Path,
        *,
        token: str = "",
        env: dict[str, str] | None = None,
        script: Path | None = None,
        preexec: Callable[[], None] | None = None,
        pacing: dict[str, Any] | None = RIG_PACING,
    ) -> None:
        self.workdir = workdir
        self.data_dir = workdir / "data"
        self.port = free_port()
        self.token = token
        self.script = script or REPO_ROOT / "bot.py"
        self.log_path = workdir / "bot.log"
        self._extra_env = env or {}
        self._preexec = preexec  # run in the child before the bot (limits, signals)
        self._pacing = pacing
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/onebot/v11/ws"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def db_path(self) -> Path:
        return self.data_dir / "pallas.db"

    def env(self) -> dict[str, str]:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "PALLAS_", "ONEBOT_"))
        }
        env.update(
            {
                "HOST": "127.0.0.1",
                "PORT": str(self.port),
                "PALLAS_DATA_DIR": str(self.data_dir),
                "ONEBOT_ACCESS_TOKEN": self.token,
                "LOG_LEVEL": "INFO",
                "PYTHONPATH": str(REPO_ROOT),
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(self._extra_env)
        return env

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self._proc = subprocess.Popen(
            [sys.executable, str(self.script)],
            cwd=self.workdir,
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=self._preexec,
        )
        log.close()

    async def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> dict[str, Any]:
        deadline = asyncio.get_running_loop().time() + timeout
        async with httpx.AsyncClient() as client:
            while True:
                if self._proc is not None and self._proc.poll() is not None:
                    raise RuntimeError(f"bot exited with {self._proc.returncode}:\n{self.log()}")
                try:
                    response = await client.get(f"{self.http_url}/pallas/api/health")
                    if response.status_code == 200:
                        await self._set_pacing(client)
                        return response.json()
                except httpx.TransportError:
                    pass
                if asyncio.get_running_loop().time() > deadline:
                    raise TimeoutError(f"bot not ready in {timeout}s:\n{self.log()}")
                await asyncio.sleep(0.1)

    def console_token(self) -> str:
        """The console's token: the one configured, else the one generated at first start."""
        configured = self._extra_env.get("PALLAS_CONSOLE_TOKEN")
        if configured:
            return configured
        return (self.data_dir / "console_token").read_text(encoding="utf-8").strip()

    async def _set_pacing(self, client: httpx.AsyncClient) -> None:
        if not self._pacing:
            return
        headers = {"Authorization": f"Bearer {self.console_token()}"}
        url = f"{self.http_url}/pallas/api/settings/delivery/global"
        changed = await client.put(url, json=self._pacing, headers=headers)
        if changed.status_code != 200:
            raise RuntimeError(f"the rig's pacing was refused: {changed.text}")

    async def health(self) -> dict[str, Any]:
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{self.http_url}/pallas/api/health")
            response.raise_for_status()
            return response.json()

    def log(self) -> str:
        return (
            self.log_path.read_text(encoding="utf-8", errors="replace")
            if self.log_path.exists()
            else ""
        )

    def set_env(self, key: str, value: str) -> None:
        self._extra_env[key] = value

    def signal(self, sig: int) -> None:
        """Send the running bot a signal (SIGSTOP, SIGCONT: a frozen process)."""
        assert self._proc is not None
        self._proc.send_signal(sig)

    def wait_exit(self, timeout: float) -> int:
        assert self._proc is not None
        return self._proc.wait(timeout=timeout)

    def kill(self) -> None:
        """Die like a crash: no shutdown hooks."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=10)

    def stop(self) -> int | None:
        if self._proc is None:
            return None
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
        return self._proc.returncode

    def run_to_exit(self, timeout: float = 30.0) -> int:
        """Start and wait for the process to end (for start-up failures)."""
        self.start()
        assert self._proc is not None
        return self._proc.wait(timeout=timeout)


@asynccontextmanager
async def running(process: BotProcess) -> AsyncIterator[BotProcess]:
    """The bot started and ready; stopped however the block ends."""
    process.start()
    try:
        await process.wait_ready()
        yield process
    finally:
        process.stop()
