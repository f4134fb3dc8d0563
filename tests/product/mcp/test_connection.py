"""One MCP server's connection against real child processes: up with its tools, a changed
tool list picked up, a server that dies reconnected, one that never answers `initialize`
or exits at once reported and retried (docs/mcp.md, "When a server fails")."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import mcp.types as mcp_types
import pytest

from pallas.product.llm.tools.base import ToolError
from pallas.product.mcp.config import ServerConfig
from pallas.product.mcp.servers import McpConnection

TOWN = str(Path(__file__).resolve().parents[2] / "support" / "mcp_town.py")


def now() -> datetime:
    return datetime.now(UTC)


async def until(check: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def connection(tmp_path: Path, *args: str, command: str = sys.executable,
               init_timeout_s: float = 20) -> tuple[McpConnection, list[list[str]]]:  # fmt: skip
    seen: list[list[str]] = []

    def found(_c: McpConnection, tools: list[mcp_types.Tool]) -> None:
        seen.append([t.name for t in tools])

    config = ServerConfig(name="town", command=command, args=args)
    return McpConnection(config, found, tmp_path, now, init_timeout_s), seen


async def stopped(conn: McpConnection, then: Callable[[], Awaitable[None]]) -> None:
    try:
        await then()
    finally:
        await conn.stop()


async def test_up_a_changed_tool_list_picked_up_and_a_dead_server_back(tmp_path: Path) -> None:
    conn, seen = connection(tmp_path, TOWN)
    conn.start()

    async def check() -> None:
        await until(lambda: conn.up, "the server up")
        assert "lookup" in seen[-1] and "grown" not in seen[-1]
        await conn.call("grow", {})
        await until(lambda: "grown" in seen[-1], "the changed list")
        with pytest.raises(ToolError, match="断开"):
            await conn.call("die", {})
        await until(lambda: conn.up and conn.restarts >= 1, "the server back")
        result = await conn.call("lookup", {"question": "x"})
        assert "阿珍" in result.content[0].text  # type: ignore[union-attr]

    await stopped(conn, check)
    assert conn.state == "stopped" and not conn.up


async def test_a_server_that_never_answers_is_reported_and_retried(tmp_path: Path) -> None:
    conn, seen = connection(tmp_path, "-c", "import time; time.sleep(60)", init_timeout_s=0.5)
    conn.start()

    async def check() -> None:
        await until(lambda: conn.restarts >= 1, "a retry")
        assert conn.state == "failed" and "超时" in conn.reason and not seen
        with pytest.raises(ToolError, match="没连上"):
            await conn.call("lookup", {})

    await stopped(conn, check)


async def test_a_server_that_exits_at_once_or_cannot_start_is_reported(tmp_path: Path) -> None:
    for args, command in ((("-c", "pass"), sys.executable), ((), str(tmp_path / "none"))):
        conn, seen = connection(tmp_path, *args, command=command)
        conn.start()

        async def check(conn: McpConnection = conn) -> None:
            await until(lambda: conn.restarts >= 1, "a retry")
            assert conn.state == "failed" and conn.reason

        await stopped(conn, check)
        assert not seen


async def test_a_server_over_streamable_http_with_its_headers(tmp_path: Path) -> None:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, TOWN, "--http", str(port), stderr=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    seen: list[list[str]] = []

    def found(_c: McpConnection, tools: list[mcp_types.Tool]) -> None:
        seen.append([t.name for t in tools])

    config = ServerConfig(name="remote", url=f"http://127.0.0.1:{port}/mcp",
                          headers={"Authorization": "Bearer t0ken"})  # fmt: skip
    conn = McpConnection(config, found, tmp_path, now)
    conn.start()

    async def check() -> None:
        await until(lambda: conn.up, "the HTTP server up", timeout=30)
        assert "lookup" in seen[-1]
        result = await conn.call("lookup", {"question": "x"})
        assert "阿珍" in result.content[0].text  # type: ignore[union-attr]

    try:
        await stopped(conn, check)
    finally:
        process.kill()
        await process.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
