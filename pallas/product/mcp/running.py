"""The configured MCP servers while the bot runs: one connection each, and each server's
tools as one plugin of the tool registry (`mcp_<server>`), replaced whenever its tool list is
read again. A server that is down keeps its tools registered: they say it is down, so a
turn is never offered them, and the owner's switches stay."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import mcp.types as mcp_types
from loguru import logger

from pallas.product.llm.tools.registry import FunctionPlugin, RegistryError
from pallas.product.mcp.config import ServerConfig
from pallas.product.mcp.names import server_names, tool_names
from pallas.product.mcp.servers import McpConnection
from pallas.product.mcp.tools import McpTool, tool_spec

PluginReload = Callable[[FunctionPlugin], None]


class McpServers:
    def __init__(self, configs: Sequence[ServerConfig], reload: PluginReload, log_dir: Path,
                 clock: Callable[[], datetime]) -> None:  # fmt: skip
        plain = server_names(c.name for c in configs)
        self.configs = list(configs)
        self.plain = plain  # configured name -> the name in its tools' names
        self.problems: dict[str, str] = {}  # a server's tools that could not be registered
        self.names: dict[str, dict[str, str]] = {}  # server -> its tools' registry names
        self._reload = reload
        self.connections = {c.name: McpConnection(c, self._found, log_dir, clock)
                            for c in configs if not c.disabled}  # fmt: skip

    async def start(self) -> None:
        for connection in self.connections.values():
            connection.start()
        if self.connections:
            logger.info("mcp: starting {} server(s)", len(self.connections))

    async def stop(self) -> None:
        """All at once: one server slow to stop does not hold up the others."""
        stops = [connection.stop() for connection in self.connections.values()]
        for failed in await asyncio.gather(*stops, return_exceptions=True):
            if isinstance(failed, BaseException):
                logger.warning("mcp: a server did not stop cleanly: {!r}", failed)

    def plugin_name(self, server: str) -> str:
        return f"mcp_{self.plain[server]}"

    def _found(self, connection: McpConnection, tools: list[mcp_types.Tool]) -> None:
        config = connection.config
        names = tool_names(self.plain[config.name], (t.name for t in tools))
        made = tuple(McpTool(tool_spec(names[t.name], t, config), t.name, connection)
                     for t in tools)  # fmt: skip
        plugin = FunctionPlugin(self.plugin_name(config.name),
                                f"MCP 服务 {config.name} 的工具", common=made)  # fmt: skip
        try:
            self._reload(plugin)
            self.names[config.name] = names
            self.problems.pop(config.name, None)
        except RegistryError as exc:  # never expected: the names are made to fit
            self.problems[config.name] = str(exc)
            logger.error("mcp {}: its tools could not be registered: {}", config.name, exc)
