"""MCP as one feature (docs/mcp.md): the servers of config/mcp.json started with the bot,
their tools in the registry, their state on the console and the doctor. Off with
PALLAS_FEATURES_OFF=["mcp"]."""

from __future__ import annotations

from loguru import logger

from pallas.product.extensions import Extension, Plugs
from pallas.product.mcp.config import McpFileError, config_path, read_servers
from pallas.product.mcp.console import MCP_PAGE, mcp_routes
from pallas.product.mcp.doctor import mcp_checks
from pallas.product.mcp.running import McpServers


def install(plugs: Plugs) -> None:
    core = plugs.core
    path = config_path(core.settings.pallas_mcp_file)
    try:
        configs = read_servers(path)
    except McpFileError as exc:  # the bot runs on without MCP; the doctor says it too
        logger.error("mcp: {}; no MCP server runs", exc)
        configs = []
    servers = McpServers(configs, plugs.reload_tool_plugin, core.data_dir / "logs", core.clock)
    plugs.add_lifespan(servers.start, servers.stop, name="mcp")
    plugs.add_api_routes(mcp_routes(servers, path))
    plugs.add_owner_page(MCP_PAGE)


EXTENSION = Extension(
    name="mcp",
    install=install,
    summary="MCP 服务的工具：config/mcp.json 里配置的服务随机器人启动，工具给模型用",
    checks=mcp_checks,
)
