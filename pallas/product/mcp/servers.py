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
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import mcp.types as mcp_types
from loguru import logger
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError

from pallas.product.llm.tools.base import ToolError
from pallas.product.mcp.config import ServerConfig
from pallas.product.mcp.names import plain

INIT_TIMEOUT_S = 20.0
LIST_TIMEOUT_S = 20.0
PING_EVERY_S = 30.0
PING_TIMEOUT_S = 10.0
BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 60.0
MAX_TOOLS = 64  # a server listing 500 tools offers the first 64 (said on the console)
MAX_PAGES = 20  # of the tool list: a server paging forever is cut off
STEADY_S = 60.0  # up this long: the next failure starts the backoff over
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
        self._up_at: float | None = None

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
        except MCPError as exc:
            if exc.code != mcp_types.CONNECTION_CLOSED:  # the server refused this call only
                raise ToolError(f"MCP 工具出错：{scrub(exc.message, self.config)[:200]}") from exc
            if self._session is session:  # this session died: reconnect (not a newer one)
                self._broken.set()
            raise ToolError(f"MCP 服务 {self.config.name} 断开了") from exc
        except Exception as exc:  # the SDK refused the answer (a schema it failed, …)
            raise ToolError(f"MCP 工具的回答用不了：{type(exc).__name__}") from exc
        if not isinstance(result, mcp_types.CallToolResult):
            raise ToolError("MCP 服务要求的交互机器人做不到")
        return result

    # -- the connection's own task ----------------------------------------------------

    async def _run(self) -> None:
        delay = BACKOFF_START_S
        try:
            while not self._stopping.is_set():
                self._up_at = None
                try:
                    await self._connected()
                except Exception as exc:  # any failure: reported, retried
                    self._down("failed", scrub(failure_words(exc), self.config))
                if self._stopping.is_set():
                    break
                if self._up_at is not None and _monotonic() - self._up_at >= STEADY_S:
                    delay = BACKOFF_START_S  # it ran a while: the next failure starts over
                logger.warning("mcp {}: {} (again in {:g} s)", self.config.name, self.reason,
                               delay)  # fmt: skip
                self.restarts += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), delay)
                delay = min(delay * 2, BACKOFF_MAX_S)
        finally:
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
            self._broken.clear()  # a late failure of the last session is not this one's
            self._session, self._up_at = session, _monotonic()
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
            log_file(self._log_dir, config.name).open("a", encoding="utf-8")
        )
        env = {**_inherited(), **config.env}
        params = StdioServerParameters(command=config.command, args=list(config.args), env=env,
                                       cwd=config.cwd)  # fmt: skip
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams

    async def _list(self, session: ClientSession) -> None:
        tools = await asyncio.wait_for(_pages(session), LIST_TIMEOUT_S)
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
            try:
                done, _ = await asyncio.wait(waits, timeout=PING_EVERY_S,
                                             return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            finally:
                for task in waits:
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


async def _pages(session: ClientSession) -> list[mcp_types.Tool]:
    """The listed tools, each name once, from at most MAX_PAGES pages."""
    tools: dict[str, mcp_types.Tool] = {}
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        params = None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        for tool in page.tools:
            tools.setdefault(tool.name, tool)  # a name listed twice is one tool
        if not page.next_cursor or page.next_cursor == cursor or len(tools) > MAX_TOOLS * 10:
            break
        cursor = page.next_cursor
    return list(tools.values())


def _monotonic() -> float:
    return time.monotonic()


def log_file(log_dir: Path, name: str) -> Path:
    """Where a stdio server's stderr goes: by its plain name (a `/` in a name is no path)."""
    return log_dir / f"mcp-{plain(name)}.log"


def scrub(text: str, config: ServerConfig) -> str:
    """`text` without the server's secrets: its env and header values, its URL's user,
    password and query (an SDK error may quote the URL it followed)."""
    secrets = [*config.env.values(), *config.headers.values()]
    if config.url:
        parts = urlsplit(config.url)
        secrets += [parts.query, parts.password or "", parts.username or ""]
    for secret in sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def public_url(url: str) -> str:
    """A server's address as the console and the doctor show it: no user, password, query
    or fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


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


async def probe(config: ServerConfig, log_dir: Path, timeout_s: float) -> tuple[list[str], int]:
    """Start the server once, initialize it and list its tools (the doctor): the tools
    offered and how many more were left out; raises what went wrong."""
    found: list[str] = []

    def listed(_connection: McpConnection, tools: list[mcp_types.Tool]) -> None:
        found.extend(t.name for t in tools)

    connection = McpConnection(config, listed, log_dir, lambda: datetime.now().astimezone())
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(connection._transport(stack))
        session = await stack.enter_async_context(ClientSession(read, write))
        await asyncio.wait_for(session.initialize(), timeout_s)
        await asyncio.wait_for(connection._list(session), timeout_s)
    return found, connection.left_out
