"""One MCP server's connection, kept up for as long as the bot runs (docs/mcp.md).

  start -> transport (a child process over stdio, or streamable HTTP) -> initialize (within
  INIT_TIMEOUT_S) -> list the tools (at most MAX_TOOLS) -> hand them to the registry
  -> watch: a ping every PING_EVERY_S, a tool-list change re-lists, a failed call or ping
     reconnects -> on any failure: down (its tools say so), retried after a backoff of 1 s
     doubling to BACKOFF_MAX_S

Everything runs in one task per server: the SDK's transports are anyio scopes that must be
left by the task that entered them. A turn's tool call uses the live session from its own
task, bounded by the tool's timeout; a call on a dead session marks it for reconnection.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
from loguru import logger
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from pallas.product.llm.tools.base import ToolError
from pallas.product.mcp.config import ServerConfig

INIT_TIMEOUT_S = 20.0
LIST_TIMEOUT_S = 20.0
PING_EVERY_S = 30.0
PING_TIMEOUT_S = 10.0
BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 60.0
MAX_TOOLS = 64  # a server listing 500 tools offers the first 64 (said on the console)
STOP_WAIT_S = 5.0

ToolsFound = Callable[["McpConnection", list[mcp_types.Tool]], None]


class McpConnection:
    def __init__(self, config: ServerConfig, found: ToolsFound, log_dir: Path,
                 clock: Callable[[], datetime], init_timeout_s: float = INIT_TIMEOUT_S,
                 ) -> None:  # fmt: skip
        self.config = config
        self._init_timeout_s = init_timeout_s
        self.state = "starting"
        self.reason = "正在连接"
        self.tools: list[mcp_types.Tool] = []
        self.left_out = 0  # tools listed past MAX_TOOLS
        self.restarts = 0
        self.since: datetime = clock()
        self._found = found
        self._log_dir = log_dir
        self._clock = clock
        self._session: ClientSession | None = None
        self._stopping = asyncio.Event()
        self._broken = asyncio.Event()
        self._relist = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._came_up = False

    @property
    def up(self) -> bool:
        return self._session is not None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"mcp {self.config.name}")

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._task), STOP_WAIT_S)
        except TimeoutError:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> mcp_types.CallToolResult:
        session = self._session
        if session is None:
            raise ToolError(f"MCP 服务 {self.config.name} 没连上：{self.reason}")
        try:
            result = await session.call_tool(tool, dict(arguments))
        except Exception as exc:  # the session died under the call: reconnect
            self._broken.set()
            raise ToolError(f"MCP 服务 {self.config.name} 断开了") from exc
        if not isinstance(result, mcp_types.CallToolResult):
            raise ToolError("MCP 服务要求的交互机器人做不到")
        return result

    # -- the connection's own task ----------------------------------------------------

    async def _run(self) -> None:
        delay = BACKOFF_START_S
        while not self._stopping.is_set():
            self._came_up = False
            try:
                await self._connected()
            except Exception as exc:  # any failure: reported, retried
                self._down("failed", failure_words(exc))
            if self._stopping.is_set():
                break
            if self._came_up:
                delay = BACKOFF_START_S  # it ran: the next failure starts over
            logger.warning("mcp {}: {} (again in {:g} s)", self.config.name, self.reason, delay)
            self.restarts += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
            delay = min(delay * 2, BACKOFF_MAX_S)
        self._down("stopped", "已停止")

    async def _connected(self) -> None:
        """One connection, from start to its end."""
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport(stack))
            session = await stack.enter_async_context(
                ClientSession(read, write, message_handler=self._heard)
            )
            await asyncio.wait_for(session.initialize(), self._init_timeout_s)
            await self._list(session)
            self._session, self._came_up = session, True
            self.state, self.reason, self.since = "running", "", self._clock()
            logger.info("mcp {}: up, {} tool(s)", self.config.name, len(self.tools))
            await self._watch(session)
        self._down("failed", "连接断了")

    @asynccontextmanager
    async def _transport(self, stack: AsyncExitStack) -> AsyncIterator[Any]:
        config = self.config
        if config.transport == "http":
            client = await stack.enter_async_context(
                create_mcp_http_client(headers=dict(config.headers) or None)
            )
            async with streamable_http_client(config.url, http_client=client) as streams:
                yield streams[0], streams[1]
            return
        self._log_dir.mkdir(parents=True, exist_ok=True)
        errlog = stack.enter_context(
            (self._log_dir / f"mcp-{config.name}.log").open("a", encoding="utf-8")
        )
        env = {**_inherited(), **config.env}
        params = StdioServerParameters(command=config.command, args=list(config.args), env=env,
                                       cwd=config.cwd)  # fmt: skip
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams

    async def _list(self, session: ClientSession) -> None:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        while True:
            params = None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
            page = await asyncio.wait_for(session.list_tools(params=params), LIST_TIMEOUT_S)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor or len(tools) > MAX_TOOLS:
                break
        self.tools, self.left_out = tools[:MAX_TOOLS], max(0, len(tools) - MAX_TOOLS)
        if self.left_out:
            logger.warning("mcp {}: {} tools listed; the first {} are offered",
                           self.config.name, len(tools), MAX_TOOLS)  # fmt: skip
        self._found(self, self.tools)

    async def _watch(self, session: ClientSession) -> None:
        while not self._stopping.is_set():
            if self._broken.is_set():
                self._broken.clear()
                raise ConnectionError("调用时连接断了")
            if self._relist.is_set():
                self._relist.clear()
                await self._list(session)
            waits = [asyncio.create_task(e.wait()) for e in (self._stopping, self._broken,
                                                             self._relist)]  # fmt: skip
            done, pending = await asyncio.wait(waits, timeout=PING_EVERY_S,
                                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            for task in pending:
                task.cancel()
            if not done:
                await asyncio.wait_for(session.send_ping(), PING_TIMEOUT_S)

    async def _heard(self, message: Any) -> None:
        """The server's notifications: a changed tool list is listed again."""
        root = getattr(message, "root", message)
        if isinstance(root, mcp_types.ToolListChangedNotification):
            self._relist.set()

    def _down(self, state: str, reason: str) -> None:
        self._session = None
        self.state, self.reason, self.since = state, reason, self._clock()


def _inherited() -> dict[str, str]:
    """What a child process needs of the bot's environment to start at all (PATH, HOME…),
    never the bot's own secrets (.env's keys are in the environment too)."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SYSTEMROOT", "USER")
    return {key: os.environ[key] for key in keep if key in os.environ}


def failure_words(exc: BaseException) -> str:
    """A failure in a few Chinese words for the owner (the log has the rest)."""
    if isinstance(exc, TimeoutError):
        return "没有按时回答（初始化或 ping 超时）"
    if isinstance(exc, FileNotFoundError | PermissionError):
        return f"启动不了：{exc}"
    if isinstance(exc, ExceptionGroup) and exc.exceptions:
        return failure_words(exc.exceptions[0])
    return f"{type(exc).__name__}: {str(exc)[:160]}"


async def probe(config: ServerConfig, log_dir: Path, timeout_s: float) -> list[str]:
    """Start the server once, initialize it and list its tools (the doctor); raises what
    went wrong."""
    found: list[str] = []

    def listed(_connection: McpConnection, tools: list[mcp_types.Tool]) -> None:
        found.extend(t.name for t in tools)

    connection = McpConnection(config, listed, log_dir, lambda: datetime.now().astimezone())
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(connection._transport(stack))
        session = await stack.enter_async_context(ClientSession(read, write))
        await asyncio.wait_for(session.initialize(), timeout_s)
        await asyncio.wait_for(connection._list(session), timeout_s)
    return found
