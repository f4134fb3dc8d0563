"""The doctor's MCP lines: each server started once for real, its tools listed; a server
that cannot start and a broken file said with what to do (docs/mcp.md, "Checking")."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from pallas.product.mcp.doctor import mcp_checks

TOWN = str(Path(__file__).resolve().parents[2] / "support" / "mcp_town.py")


@dataclass(frozen=True)
class Settings:
    pallas_mcp_file: Path
    pallas_data_dir: Path


async def test_the_doctor_starts_each_server_once_and_lists_its_tools(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {
        "town": {"command": sys.executable, "args": [TOWN], "env": {"KEY": "s3cret"}},
        "off": {"command": sys.executable, "args": [TOWN], "disabled": True},
        "broken": {"command": str(tmp_path / "nothing-here")}}}), encoding="utf-8")  # fmt: skip
    town, off, broken = await mcp_checks(Settings(path, tmp_path))
    assert town.ok and "town：能用，6 个工具：lookup、post_notice、huge" in town.what
    assert off.ok and "关掉了" in off.what
    assert not broken.ok and "broken 启动不了" in broken.what and "mcp-broken.log" in broken.fix
    assert all("s3cret" not in c.what + c.fix for c in (town, off, broken))
    path.write_text("{", encoding="utf-8")
    [bad] = await mcp_checks(Settings(path, tmp_path))
    assert not bad.ok and "MCP 配置读不了" in bad.what
