"""MCP on the console (docs/mcp.md): each configured server, whether it runs, why not, and
its tools; never the values of its `env` or `headers` (secrets), only their names' count.

  GET /pallas/api/mcp    the file read, and each server
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter

from pallas.product.mcp.running import McpServers
from pallas.product.mcp.servers import public_url
from pallas.product.ports import OwnerPage

MCP_PAGE = OwnerPage(
    key="mcp",
    title="MCP 服务",
    intro="config/mcp.json 里配置的 MCP 服务：在不在运行、为什么没运行、提供了哪些工具。",
    script=Path(__file__).parent / "static" / "mcp.js",
)


def server_view(servers: McpServers, name: str) -> dict[str, Any]:
    config = next(c for c in servers.configs if c.name == name)
    connection = servers.connections.get(name)
    view: dict[str, Any] = {
        "name": name, "plugin": servers.plugin_name(name), "transport": config.transport,
        "where": config.command if config.transport == "stdio" else public_url(config.url),
        "secrets": len(config.env) + len(config.headers),
        "groups": list(config.groups), "private": config.private,
        "state": "off" if connection is None else connection.state,
        "reason": "配置里关掉了" if connection is None else connection.reason,
        "restarts": 0 if connection is None else connection.restarts,
        "left_out": 0 if connection is None else connection.left_out,
        "problem": servers.problems.get(name, ""), "tools": [],
    }  # fmt: skip
    if connection is not None:
        names = servers.names.get(name, {})
        view["tools"] = [{"original": t.name, "name": names.get(t.name, "")}
                         for t in connection.tools]  # fmt: skip
    return view


def mcp_routes(servers: McpServers, path: Path) -> APIRouter:
    router = APIRouter()

    @router.get("/mcp", tags=["mcp"])
    async def listed() -> dict[str, Any]:
        return {"file": str(path), "servers": [server_view(servers, c.name)
                                               for c in servers.configs]}  # fmt: skip

    return router
