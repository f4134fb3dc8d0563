"""Console glue: mounts the /pallas/ HTTP API on NoneBot's FastAPI app."""

from __future__ import annotations

import nonebot
from fastapi import FastAPI
from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.console.health import HealthReport, health_report

__plugin_meta__ = PluginMetadata(
    name="console",
    description="HTTP API under /pallas/ (health for now).",
    usage="GET /pallas/api/health",
)

app: FastAPI = nonebot.get_app()


@app.get("/pallas/api/health", response_model=HealthReport)
async def health() -> HealthReport:
    runtime = current_runtime()
    return health_report(
        bot_ids=nonebot.get_bots().keys(),
        database=runtime.database_backend,
        model_chat=runtime.model_chat_enabled,
    )
