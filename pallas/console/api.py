"""The console's HTTP API under /pallas/api (docs/console.md). Every route needs the console
token (guard.py); health, outside this router, does not.

  GET  overview                          bots, today's counts and cost, activity by hour
  GET  chats, chats/{id}/messages        the chats, a chat's lines (with the turn behind each)
  GET  messages/{id}/explain, turns/{id}/trace      why it did (or did not) answer
  GET  persons?q=, persons/{id}          someone, and what each feature keeps about them
  GET  jobs, models                      durable work, models and cost
  GET  tools; POST tools/{kind}/{name}?on=   tools, plugins and skills; their switches
  GET  settings, settings/{key}/{scope}; PUT settings/{key}/{scope}    the registry
  GET  openapi.json                      this API, described

Features add their own routes under the same prefix and guard (`add_api_routes`): persona's
POST persons/{id}/lift, DELETE notes/{id}, GET promises?self_id=; memory's POST
memory/{id}/forget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.console.charts import by_day
from pallas.console.cost_api import cost_routes
from pallas.console.guard import Door, Visitor, visitor
from pallas.console.overview import Overview, overview
from pallas.console.tools_view import SwitchRefused, inventory, switch
from pallas.core.inbound import StreamKind
from pallas.core.numbers import read_db_id
from pallas.platform.http_params import OptionalRowIdQuery, RowId
from pallas.platform.sandbox import SandboxHub, SandboxOutlet
from pallas.product.conversation.ingress import Ingress
from pallas.product.llm.tools.toolset import ToolSetup
from pallas.product.ports import OwnerPage, PersonAction, PersonFacet
from pallas.product.settings.registry import Scope, SettingsError, SettingsRegistry
from pallas.providers.budget import DailyBudget
from pallas.providers.catalog import Catalog
from pallas.store import console_reads
from pallas.store.audit_trail import explain, trace
from pallas.store.conversation import stream_key
from pallas.store.jobs import JobStore
from pallas.store.llm_usage import cost_report

PAGE_LIMIT = 200


@dataclass
class ConsoleDeps:
    engine: AsyncEngine
    door: Door
    registry: SettingsRegistry
    jobs: JobStore
    catalog: Catalog
    bots: Callable[[], Iterable[str]]
    database: str
    clock: Callable[[], datetime]
    # The sandbox: where a pretend member's words enter, the outlet that answers, the pages
    # listening.
    ingress: Ingress
    sandbox: SandboxOutlet
    hub: SandboxHub
    tools: ToolSetup  # the tools, plugins and skills, and their switches
    # What the features plug into the console: their API routes, their keys of a person's
    # page (the seam's `add_api_routes`, `add_person_facet`).
    routes: Sequence[APIRouter] = ()
    facets: Sequence[PersonFacet] = ()
    person_actions: Mapping[str, PersonAction] = field(default_factory=dict)
    owner_pages: Sequence[OwnerPage] = ()  # the features' own pages (`add_owner_page`)
    budget: DailyBudget | None = None  # the daily cap, when .env sets one (docs/cost.md)


def build_api(deps: ConsoleDeps) -> APIRouter:
    def guard(request: Request) -> Visitor:
        return visitor(request, deps.door)

    router = APIRouter(prefix="/pallas/api", dependencies=[Depends(guard)])
    _reads(router, deps)
    _people(router, deps)
    _work(router, deps)
    _settings(router, deps)
    router.include_router(cost_routes(deps.engine, deps.catalog, deps.budget))
    for feature_routes in deps.routes:
        router.include_router(feature_routes)
    return router


def _reads(router: APIRouter, deps: ConsoleDeps) -> None:
    @router.get("/overview", response_model=Overview, tags=["overview"])
    async def get_overview() -> Overview:
        return await overview(deps.engine, deps.bots(), deps.database, deps.clock())

    @router.get("/chats", tags=["chats"])
    async def get_chats() -> list[dict[str, Any]]:
        return [asdict(row) for row in await console_reads.chats(deps.engine)]

    @router.get("/chats/{stream_id}/messages", tags=["chats"])
    async def get_lines(
        stream_id: RowId,
        before: OptionalRowIdQuery = None,
        limit: int = Query(50, ge=1, le=PAGE_LIMIT),
    ) -> list[dict[str, Any]]:
        rows = await console_reads.chat_lines(deps.engine, stream_id, before, limit)
        return [asdict(row) for row in rows]

    @router.get("/messages/{message_id}/explain", tags=["chats"])
    async def get_explain(message_id: RowId) -> dict[str, Any]:
        path = await explain(deps.engine, message_id)
        if path is None:
            raise HTTPException(404, "没有这条消息")
        return asdict(path)

    @router.get("/turns/{turn_id}/trace", tags=["chats"])
    async def get_trace(turn_id: RowId) -> dict[str, Any]:
        found = await trace(deps.engine, turn_id)
        if not found.events and not found.outbox:
            raise HTTPException(404, "没有这一轮")
        return asdict(found)


def _people(router: APIRouter, deps: ConsoleDeps) -> None:
    @router.get("/persons", tags=["persons"])
    async def get_persons(
        q: str = Query("", max_length=64), limit: int = Query(50, ge=1, le=PAGE_LIMIT)
    ) -> list[dict[str, Any]]:
        return [asdict(row) for row in await console_reads.persons(deps.engine, q, limit)]

    @router.get("/persons/{person_id}", tags=["persons"])
    async def get_person(person_id: RowId) -> dict[str, Any]:
        return await person_detail(deps, person_id)


async def person_detail(deps: ConsoleDeps, person_id: int) -> dict[str, Any]:
    """The person, their standing in each chat, and what each feature keeps about them
    (empty when the feature is off, so the page reads the same keys)."""
    found = await console_reads.person(deps.engine, person_id)
    if found is None:
        raise HTTPException(404, "没有这个人")
    detail: dict[str, Any] = {
        "person": asdict(found),
        "favorability": {},
        "notes": [],
        "facts": [],
        "memory_changes": [],
        "standings": [],
    }
    bots = tuple(deps.bots())
    for facet in deps.facets:  # a feature adds its keys; the person is the core's
        detail |= {k: v for k, v in (await facet(person_id, bots)).items() if k != "person"}
    return detail


def _work(router: APIRouter, deps: ConsoleDeps) -> None:
    @router.get("/jobs", tags=["jobs"])
    async def get_jobs(limit: int = Query(50, ge=1, le=PAGE_LIMIT)) -> dict[str, Any]:
        return {
            "counts": await deps.jobs.counts(),
            "recent": await console_reads.recent_jobs(deps.engine, limit),
        }

    @router.get("/models", tags=["models"])
    async def get_models(days: int = Query(7, ge=1, le=90)) -> dict[str, Any]:
        now = deps.clock()
        report = await cost_report(deps.engine, now - timedelta(days=days), now)
        rows = await console_reads.call_costs(deps.engine, now - timedelta(days=days), now)
        models = [
            {"name": m.name, "provider": m.provider, "types": sorted(t.value for t in m.types)}
            for m in deps.catalog.models
        ]
        return {
            "models": models,
            "cost": asdict(report),
            "total_cost": report.total_cost,
            "by_day": [asdict(day) for day in by_day(rows, now, days)],
        }

    @router.get("/tools", tags=["tools"])
    async def get_tools() -> list[dict[str, Any]]:
        return [asdict(item) for item in await inventory(deps.tools)]

    @router.post("/tools/{kind}/{name}", tags=["tools"])
    async def set_tool(kind: str, name: str, on: bool = Query(...)) -> dict[str, bool]:
        try:
            await switch(deps.tools, kind, name, on, deps.clock())
        except SwitchRefused as exc:
            raise HTTPException(400, str(exc)) from None
        return {"enabled": on}


def _settings(router: APIRouter, deps: ConsoleDeps) -> None:
    @router.get("/settings", tags=["settings"])
    async def get_sections() -> list[dict[str, Any]]:
        return [
            {"key": s.key, "title": s.title, "scope": s.scope.value, "applies": s.applies}
            for s in deps.registry.sections()
        ]

    @router.get("/settings/{key}/{scope_id}", tags=["settings"])
    async def get_section(key: str, scope_id: str) -> dict[str, Any]:
        await check_scope(deps, key, scope_id)
        return asdict(await deps.registry.read(key, scope_id))

    @router.put("/settings/{key}/{scope_id}", tags=["settings"])
    async def put_section(key: str, scope_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        await check_scope(deps, key, scope_id)
        try:
            return asdict(await deps.registry.update(key, scope_id, changes, deps.clock()))
        except SettingsError as exc:
            raise HTTPException(422, {"problems": exc.problems}) from None


async def check_scope(deps: ConsoleDeps, key: str, scope_id: str) -> None:
    """404 unless the section exists and `scope_id` names something of its scope."""
    try:
        section = deps.registry.section(key)
    except SettingsError as exc:
        raise HTTPException(404, exc.problems) from None
    if section.scope is Scope.GROUP:
        row_id = read_db_id(scope_id)
        stream = await stream_key(deps.engine, row_id) if row_id is not None else None
        if stream is None or stream.kind is not StreamKind.GROUP:
            raise HTTPException(404, f"没有群聊 {scope_id}")
    elif section.scope is Scope.ACCOUNT and read_db_id(scope_id) is None:
        raise HTTPException(404, f"没有账号 {scope_id}")
    elif section.scope is Scope.GLOBAL and scope_id != "global":
        raise HTTPException(404, "全局设置的范围写作 global")


def openapi_route(app: FastAPI, door: Door) -> APIRouter:
    """The API described (only the /pallas paths), behind the token like the rest."""
    router = APIRouter(prefix="/pallas/api")

    @router.get("/openapi.json", include_in_schema=False)
    async def described(request: Request) -> dict[str, Any]:
        visitor(request, door)
        schema = app.openapi()
        paths = {k: v for k, v in schema.get("paths", {}).items() if k.startswith("/pallas/")}
        return {**schema, "paths": paths}

    return router
