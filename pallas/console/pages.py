"""The web console's pages, server-rendered from the same reads as the API (docs/console.md).
Jinja2 with autoescaping: chat text and nicknames are always inert. Every page needs a signed
in browser (the login page sets the cookie); every form that changes something carries the
session's CSRF value."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from pallas.console.api import ConsoleDeps, OptionalRowIdQuery, RowId, check_scope, person_detail
from pallas.console.auth import COOKIE
from pallas.console.budget_view import CapsRefused, budget_today, caps_asked
from pallas.console.charts import by_day, day_bars, day_top, hour_bars, hour_ticks, hour_top
from pallas.console.forms import FormError, field_value, read_form
from pallas.console.guard import Visitor, sign_in, visitor
from pallas.console.overview import Overview, overview
from pallas.console.replay import ReplayAsked, replay_in_console
from pallas.console.setup_gaps import first_run, has_chat_model, priced, setup_gaps
from pallas.console.tools_view import SwitchRefused, inventory, switch
from pallas.console.words import JOB_KINDS, JOB_STATES, MODEL_TYPES, PURPOSES, chat_key, word
from pallas.platform.sandbox import SANDBOX
from pallas.product.conversation.plain_trail import (
    KIND_WORDS,
    STATUS_WORDS,
    TurnCost,
    message_headline,
    step_text,
    turn_headline,
)
from pallas.product.conversation.why import ORIGIN_NAMES
from pallas.product.replay.render import render
from pallas.product.replay.run import ReplayError
from pallas.product.settings.registry import FieldInfo, Scope, SettingsError
from pallas.store import console_reads
from pallas.store.audit_trail import explain, trace
from pallas.store.llm_usage import cost_report, turn_spending

TEMPLATES = Path(__file__).parent / "templates"
WIRE_NAME = re.compile(r"\b([a-z][a-z0-9_]*?)__([a-z][a-z0-9_]*)\b")
MAX_FORM_BYTES = 64 * 1024
MAX_FIELD_CHARS = 300  # one field of a person page's form: a memory holds at most 300
WEEK = timedelta(days=7)
# What the person page says after one of its actions (a feature's new action: 这个操作).
ACTION_WORDS = {
    "memory_edit": "改这条记忆",
    "memory_forget": "忘掉这条记忆",
    "memory_restore": "恢复这条记忆",
    "lift": "原谅TA",
    "note_drop": "删掉这条备注",
    "favour_reset": "好感清零",
}


def action_said(done: str, refused: str) -> str:
    """The line at the top of the person page after an action (pure)."""
    if done:
        return f"{ACTION_WORDS.get(done, '这个操作')}：做好了。"
    if refused:
        return f"{ACTION_WORDS.get(refused, '这个操作')}：没有做成（可能已经变了，刷新看看）。"
    return ""


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["local"] = lambda t: t.astimezone().strftime("%m-%d %H:%M:%S") if t else ""
    env.filters["step"] = step_text
    env.filters["origin"] = lambda word: ORIGIN_NAMES.get(word, "其它")
    env.filters["kind"] = lambda word: KIND_WORDS.get(word, "其它")
    env.filters["status"] = lambda word: STATUS_WORDS.get(word, "其它")
    env.filters["job_kind"] = partial(word, JOB_KINDS)
    env.filters["job_state"] = partial(word, JOB_STATES)
    env.filters["model_type"] = partial(word, MODEL_TYPES)
    env.filters["purpose"] = partial(word, PURPOSES)
    env.filters["chat_key"] = chat_key
    # A tool's wire name (chat__history, as the model calls it) as the console names it.
    env.filters["dotted"] = lambda text: WIRE_NAME.sub(r"\1.\2", text)
    env.filters["readable"] = lambda v: json.dumps(v, ensure_ascii=False, indent=1, default=str)
    return env


class Pages:
    def __init__(self, deps: ConsoleDeps) -> None:
        self.deps = deps
        self.env = environment()

    def render(self, name: str, guest: Visitor | None, **values: Any) -> HTMLResponse:
        csrf = guest.csrf if guest else ""
        menu = self.deps.owner_pages
        html = self.env.get_template(name).render(csrf=csrf, owner_pages=menu, **values)
        return HTMLResponse(html)

    async def guest(self, request: Request, form_csrf: str = "") -> Visitor:
        return visitor(request, self.deps.door, form_csrf)


def build_pages(pages: Pages) -> APIRouter:
    router = APIRouter(prefix="/pallas", include_in_schema=False)
    _entry(router, pages)
    _reading(router, pages)
    _work(router, pages)
    _people(router, pages)
    _settings(router, pages)
    _owner_pages(router, pages)
    return router


async def guest_or_login(pages: Pages, request: Request) -> Visitor | Response:
    try:
        return await pages.guest(request)
    except HTTPException:
        return RedirectResponse("/pallas/login", status_code=303)


async def _form(request: Request) -> dict[str, list[str]]:
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise HTTPException(413, "表单太大")
    return read_form(body)


def _entry(router: APIRouter, pages: Pages) -> None:
    @router.get("/")
    async def home() -> Response:
        return RedirectResponse("/pallas/overview", status_code=303)

    @router.get("/login")
    async def login_page() -> Response:
        return pages.render("login.html", None, error="")

    @router.post("/login")
    async def login(request: Request) -> Response:
        token = (await _form(request)).get("token", [""])[0]
        response = RedirectResponse("/pallas/overview", status_code=303)
        try:
            sign_in(request, response, pages.deps.door, token)
        except HTTPException as exc:
            page = pages.render("login.html", None, error=str(exc.detail))
            page.status_code = exc.status_code
            return page
        return response

    @router.post("/logout")
    async def logout(request: Request) -> Response:
        form = await _form(request)
        await pages.guest(request, form.get("csrf_token", [""])[0])
        response = RedirectResponse("/pallas/login", status_code=303)
        response.delete_cookie(COOKIE, path="/pallas")
        return response


def _reading(router: APIRouter, pages: Pages) -> None:
    deps = pages.deps

    @router.get("/overview")
    async def overview_page(request: Request) -> Response:
        guest = await guest_or_login(pages, request)
        if isinstance(guest, Response):
            return guest
        seen = await overview(deps.engine, deps.bots(), deps.database, deps.clock())
        return pages.render("overview.html", guest, o=seen, **await _overview_parts(deps, seen))

    @router.get("/chats")
    async def chats_page(request: Request) -> Response:
        guest = await guest_or_login(pages, request)
        if isinstance(guest, Response):
            return guest
        return pages.render("chats.html", guest, chats=await console_reads.chats(deps.engine))

    @router.get("/chats/{stream_id}")
    async def chat_page(
        request: Request, stream_id: RowId, before: OptionalRowIdQuery = None
    ) -> Response:
        guest = await guest_or_login(pages, request)
        if isinstance(guest, Response):
            return guest
        lines = await console_reads.chat_lines(deps.engine, stream_id, before, 100)
        earlier = bool(lines) and await console_reads.has_earlier(
            deps.engine, stream_id, lines[0].message_id
        )
        return pages.render("chat.html", guest, stream_id=stream_id, lines=lines, earlier=earlier)

    @router.get("/messages/{message_id}")
    async def explain_page(request: Request, message_id: RowId) -> Response:
        guest = await guest_or_login(pages, request)
        if isinstance(guest, Response):
            return guest
        path = await explain(deps.engine, message_id)
        if path is None:
            raise HTTPException(404, "没有这条消息")
        cost = await _turn_cost(deps, path.turn.turn_id) if path.turn else None
        story = message_headline(path, cost)
        return pages.render("explain.html", guest, path=path, story=story)

    @router.get("/turns/{turn_id}")
    async def trace_page(request: Request, turn_id: RowId) -> Response:
        guest = await guest_or_login(pages, request)
        if isinstance(guest, Response):
            return guest
        turn = await trace(deps.engine, turn_id)
        if not turn.events and not turn.outbox:
            raise HTTPException(404, "没有这一轮")
        story = turn_headline(turn, await _turn_cost(deps, turn_id))
        return pages.render("trace.html", guest, turn=turn, story=story)


async def _turn_cost(deps: ConsoleDeps, turn_id: int) -> TurnCost:
    calls, cost = await turn_spending(deps.engine, turn_id)
    return TurnCost(calls, cost, priced(deps.catalog))


async def _overview_parts(deps: ConsoleDeps, seen: Overview) -> dict[str, Any]:
    """What the overview shows beside the counts: what is missing, the first-run steps, and
    the chart with its axes."""
    tried = await console_reads.platform_has_messages(deps.engine, SANDBOX)
    return {
        "gaps": setup_gaps(deps.catalog, seen.bots, await inventory(deps.tools)),
        "steps": first_run(bool(seen.bots), has_chat_model(deps.catalog), tried),
        "priced": priced(deps.catalog),
        "chart": hour_bars(seen.hours),
        "top": hour_top(seen.hours),
        "ticks": hour_ticks(seen.hours),
    }


def _owner_pages(router: APIRouter, pages: Pages) -> None:
    """The features' own pages: a shell here, drawn by the feature's script (read once)."""
    plugged = {page.key: page for page in pages.deps.owner_pages}
    scripts = {key: page.script.read_bytes() for key, page in plugged.items()}

    @router.get("/pages/{key}")
    async def owner_page(request: Request, key: str) -> Response:
        guest = await guest_or_login(pages, request)
        if isinstance(guest, Response):
            return guest
        if key not in plugged:
            raise HTTPException(404, "没有这个页面")
        return pages.render("owner_page.html", guest, page=plugged[key])

    @router.get("/pages/{key}/script.js")
    async def owner_script(request: Request, key: str) -> Response:
        await pages.guest(request)
        if key not in scripts:
            raise HTTPException(404, "没有这个页面")
        return Response(scripts[key], media_type="text/javascript; charset=utf-8")


def _work(router: APIRouter, pages: Pages) -> None:
    deps = pages.deps

    @router.get("/jobs")
    async def jobs_page(request: Request) -> Response:
        guest = await guest_or_login(pages, request)
        if isinstance(guest, Response):
            return guest
        counts = await deps.jobs.counts()
        recent = await console_reads.recent_jobs(deps.engine, 100)
        return pages.render("jobs.html", guest, counts=counts, jobs=recent)

    @router.get("/tools")
    async def tools_page(request: Request, refused: str = "") -> Response:
        guest = await guest_or_login(pages, request)
        if isinstance(guest, Response):
            return guest
        items = await inventory(deps.tools)
        return pages.render("tools.html", guest, items=items, refused=refused[:200])

    @router.post("/tools/{kind}/{name}")
    async def tool_switch(request: Request, kind: str, name: str) -> Response:
        form = await _form(request)
        await pages.guest(request, form.get("csrf_token", [""])[0])
        on = form.get("on", [""])[0] == "1"
        try:
            await switch(deps.tools, kind, name, on, deps.clock())
        except SwitchRefused as exc:
            return RedirectResponse(f"/pallas/tools?{urlencode({'refused': str(exc)})}", 303)
        return RedirectResponse("/pallas/tools", status_code=303)

    @router.get("/models")
    async def models_page(request: Request, refused: str = "") -> Response:
        guest = await guest_or_login(pages, request)
        if isinstance(guest, Response):
            return guest
        now = deps.clock()
        report = await cost_report(deps.engine, now - WEEK, now)
        days = by_day(await console_reads.call_costs(deps.engine, now - WEEK, now), now, 7)
        budget = None if deps.budget is None else await budget_today(deps.budget)
        return pages.render(
            "models.html", guest, models=deps.catalog.models, report=report,
            days=days, bars=day_bars(days), top=day_top(days), priced=priced(deps.catalog),
            budget=budget, refused=refused[:200],
        )  # fmt: skip

    @router.post("/budget")
    async def budget_caps(request: Request) -> Response:
        form = await _form(request)
        await pages.guest(request, form.get("csrf_token", [""])[0])
        if deps.budget is None:
            return RedirectResponse("/pallas/models", status_code=303)
        cost, tokens = form.get("cost", [""])[0], form.get("tokens", [""])[0]
        try:
            await deps.budget.set_today(caps_asked(deps.budget.today_limits, cost, tokens))
        except CapsRefused as exc:
            return RedirectResponse(f"/pallas/models?{urlencode({'refused': str(exc)})}", 303)
        return RedirectResponse("/pallas/models#budget", status_code=303)

    @router.get("/replay")
    async def replay_page(
        request: Request,
        group: str = Query("", max_length=20),
        day: str = Query("", max_length=10),
        changes: str = Query("", max_length=2000),
    ) -> Response:
        guest = await guest_or_login(pages, request)
        if isinstance(guest, Response):
            return guest
        told, refused = "", ""
        if group:
            lines = tuple(line.strip() for line in changes.splitlines() if line.strip())
            try:
                asked = ReplayAsked(group, day or None, changes=lines)
                told = render(await replay_in_console(deps.engine, deps.catalog, asked))
            except ReplayError as exc:
                refused = str(exc)
        return pages.render(
            "replay.html", guest, group=group, day=day, changes=changes, told=told,
            refused=refused,
        )  # fmt: skip


def _people(router: APIRouter, pages: Pages) -> None:
    deps = pages.deps

    @router.get("/persons")
    async def persons_page(request: Request, q: str = "") -> Response:
        guest = await guest_or_login(pages, request)
        if isinstance(guest, Response):
            return guest
        found = await console_reads.persons(deps.engine, q[:64], 100)
        return pages.render("persons.html", guest, q=q[:64], persons=found)

    @router.get("/persons/{person_id}")
    async def person_page(
        request: Request, person_id: RowId, done: str = "", refused: str = ""
    ) -> Response:
        guest = await guest_or_login(pages, request)
        if isinstance(guest, Response):
            return guest
        detail = await person_detail(deps, person_id)
        said = action_said(done, refused)
        return pages.render("person.html", guest, d=detail, said=said, refused=bool(refused))

    @router.post("/persons/{person_id}/{action}")
    async def person_action(request: Request, person_id: RowId, action: str) -> Response:
        """What a feature lets the owner do on the page (correct a memory, forgive...)."""
        form = await _form(request)
        await pages.guest(request, form.get("csrf_token", [""])[0])
        run = deps.person_actions.get(action)
        if run is None:
            raise HTTPException(404, "没有这个操作")
        if await console_reads.person(deps.engine, person_id) is None:
            raise HTTPException(404, "没有这个人")
        fields = {name: given[-1] for name, given in form.items()}
        too_long = any(len(value) > MAX_FIELD_CHARS for value in fields.values())
        done = not too_long and await run(person_id, fields, deps.clock())
        outcome = "done" if done else "refused"
        return RedirectResponse(f"/pallas/persons/{person_id}?{outcome}={action}", 303)


def _settings(router: APIRouter, pages: Pages) -> None:
    deps = pages.deps

    @router.get("/settings")
    async def settings_page(request: Request) -> Response:
        guest = await guest_or_login(pages, request)
        if isinstance(guest, Response):
            return guest
        chats = await console_reads.chats(deps.engine)
        groups = [c for c in chats if c.kind == "group"]
        accounts = sorted({account for c in chats for account in (c.self_id, *c.accounts)})
        sections = deps.registry.sections()
        return pages.render(
            "settings.html", guest, sections=sections, groups=groups, accounts=accounts
        )

    @router.get("/settings/{key}/{scope_id}")
    async def section_page(request: Request, key: str, scope_id: str) -> Response:
        guest = await guest_or_login(pages, request)
        if isinstance(guest, Response):
            return guest
        await check_scope(deps, key, scope_id)
        values = await deps.registry.read(key, scope_id)
        return await _section(pages, guest, key, values)

    @router.post("/settings/{key}/{scope_id}")
    async def save_section(request: Request, key: str, scope_id: str) -> Response:
        form = await _form(request)
        guest = await pages.guest(request, form.get("csrf_token", [""])[0])
        await check_scope(deps, key, scope_id)
        values = await deps.registry.read(key, scope_id)
        try:
            changes = read_section_form(values.fields, form)
            values = await deps.registry.update(key, scope_id, changes, deps.clock())
        except (SettingsError, FormError) as exc:
            typed = {name: given[-1] for name, given in form.items() if name != "csrf_token"}
            page = await _section(pages, guest, key, values, problems=exc.problems, typed=typed)
            page.status_code = 422
            return page
        return await _section(pages, guest, key, values, saved=True)


async def _section(
    pages: Pages, guest: Visitor, key: str, values: Any, *, saved: bool = False,
    problems: dict[str, str] | None = None, typed: dict[str, str] | None = None,
) -> HTMLResponse:  # fmt: skip
    section = pages.deps.registry.section(key)
    return pages.render(
        "section.html", guest, section=section, values=values, problems=problems or {},
        saved=saved, submitted=typed or {}, scope=await _scope_label(pages.deps, section, values),
    )  # fmt: skip


async def _scope_label(deps: ConsoleDeps, section: Any, values: Any) -> str:
    """What the section's values apply to, as the owner names it (never a row id)."""
    if section.scope is Scope.GROUP:
        return await console_reads.group_title(deps.engine, int(values.scope_id))
    if section.scope is Scope.ACCOUNT:
        return f"账号 {values.scope_id}"
    return "全局"


def read_section_form(fields: Sequence[FieldInfo], form: dict[str, list[str]]) -> dict[str, Any]:
    """The form's values for every field, or every field's problem at once."""
    values, problems = {}, {}
    for info in fields:
        try:
            values[info.name] = field_value(info, form)
        except FormError as exc:
            problems.update(exc.problems)
    if problems:
        raise FormError(problems)
    return values
