"""A bare NoneBot: same driver, host and port as the real bot, stock OneBot v11 adapter,
only the bench probe plugin. A tiny health route lets the harness wait for readiness."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import nonebot  # noqa: E402
from nonebot.adapters.onebot.v11 import Adapter  # noqa: E402

from pallas.config import ConfigError, load_settings  # noqa: E402


def init_bare() -> None:
    try:
        settings = load_settings(env_file=None)
    except ConfigError as exc:
        print(f"bare: cannot start, {exc}", file=sys.stderr)
        sys.exit(2)
    nonebot.init(
        driver="~fastapi+~websockets+~httpx",
        host=settings.host,
        port=settings.port,
        onebot_access_token=settings.onebot_access_token or None,
    )
    nonebot.get_driver().register_adapter(Adapter)
    nonebot.load_plugin("bench.probe")
    add_health_route()


def add_health_route() -> None:
    app = nonebot.get_app()

    @app.get("/pallas/api/health")
    async def health() -> dict[str, Any]:
        return {"ok": True, "bots": sorted(nonebot.get_bots())}


if __name__ == "__main__":
    init_bare()
    nonebot.run()
