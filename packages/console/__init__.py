"""Console glue: mounts the /pallas/ HTTP API (and, below it, the web pages) on NoneBot's
FastAPI app (docs/console.md)."""

from __future__ import annotations

import nonebot
from fastapi import FastAPI
from nonebot.plugin import PluginMetadata

from packages._runtime import current_runtime
from pallas.app import utc_now
from pallas.console.api import ConsoleDeps, build_api, openapi_route
from pallas.console.boundary import Boundary
from pallas.console.guard import Door, door_routes
from pallas.console.health import HealthReport, health_report
from pallas.console.pages import Pages, build_pages
from pallas.console.sandbox_pages import sandbox_routes
from pallas.console.static_files import static_routes

__plugin_meta__ = PluginMetadata(
    name="console",
    description="The web console and its HTTP API under /pallas/.",
    usage="GET /pallas/api/health; the console at /pallas/ (docs/console.md)",
)

app: FastAPI = nonebot.get_app()
_runtime = current_runtime()


@app.get("/pallas/api/health", response_model=HealthReport)
async def health() -> HealthReport:
    runtime = current_runtime()
    return health_report(
        bot_ids=nonebot.get_bots().keys(),
        database=runtime.database_backend,
        model_chat=runtime.model_chat_enabled,
        platform_of=runtime.outlet.onebot.platform,
    )


_door = Door(token_of=lambda: _runtime.console_token, clock=utc_now)
_deps = ConsoleDeps(
    engine=_runtime.engine,
    door=_door,
    registry=_runtime.settings_registry,
    jobs=_runtime.jobs.store,
    catalog=_runtime.models.catalog,
    bots=lambda: nonebot.get_bots().keys(),
    database=_runtime.database_backend,
    clock=utc_now,
    ingress=_runtime.conversation.ingress,
    sandbox=_runtime.outlet.sandbox,
    hub=_runtime.outlet.sandbox.hub,
    tools=_runtime.tools,
    routes=_runtime.extensions.plugged.api_routes,
    facets=_runtime.extensions.plugged.person_facets,
    person_actions=dict(_runtime.extensions.plugged.person_actions),
    owner_pages=_runtime.extensions.plugged.owner_pages,
    budget=_runtime.models.budget,
)
app.include_router(door_routes(_door))
app.include_router(build_api(_deps))
app.include_router(openapi_route(app, _door))
_pages = Pages(_deps)
app.include_router(build_pages(_pages))
app.include_router(sandbox_routes(_pages))
app.include_router(static_routes())
# In front of every route, NoneBot's own included: bodies bounded and credentials settled
# before anything is read, security headers on every answer (docs/security.md).
app.add_middleware(Boundary, door=_door)
