"""MCP's lines of `python -m pallas doctor`: the file read, and each server started once,
initialized and asked for its tools (docs/mcp.md). Secrets are never printed."""

from __future__ import annotations

from typing import Any

from pallas.product.mcp.config import McpFileError, config_path, read_servers
from pallas.product.mcp.servers import MAX_TOOLS, failure_words, log_file, probe, scrub
from pallas.product.ports import Check

PROBE_TIMEOUT_S = 15.0
SHOWN_TOOLS = 8


async def mcp_checks(settings: Any) -> list[Check]:
    path = config_path(settings.pallas_mcp_file)
    try:
        servers = read_servers(path)
    except McpFileError as exc:
        return [Check(False, f"MCP 配置读不了：{exc}", "按 docs/mcp.md 改好这个文件，再重启")]
    checks = []
    for config in servers:
        if config.disabled:
            checks.append(Check(True, f"MCP 服务 {config.name}：配置里关掉了"))
            continue
        logs = settings.pallas_data_dir / "logs"
        try:
            tools, left_out = await probe(config, logs, PROBE_TIMEOUT_S)
        except Exception as exc:  # whatever it is, the owner reads it here
            why = scrub(failure_words(exc), config)
            log = f"，启动日志在 {log_file(logs, config.name)}" if config.command else ""
            checks.append(Check(False, f"MCP 服务 {config.name} 启动不了：{why}",
                                "看看命令、参数和地址对不对" + log))  # fmt: skip
            continue
        names = "、".join(tools[:SHOWN_TOOLS]) + ("……" if len(tools) > SHOWN_TOOLS else "")
        more = f"（还有 {left_out} 个没用上，最多用 {MAX_TOOLS} 个）" if left_out else ""
        checks.append(Check(True, f"MCP 服务 {config.name}：能用，{len(tools)} 个工具{more}："
                                  f"{names}"))  # fmt: skip
    return checks
