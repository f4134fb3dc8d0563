"""End to end: the console's HTTP API on the real bot process. Every route refuses a request
without the token, with a wrong one and with a forged or expired cookie; a signed-in browser
must send its CSRF value to change anything; failed logins are rate-limited; settings are
validated whole (the field named, nothing half-saved) and the next turn uses them."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from tests.support.bot_process import BotProcess
from tests.support.fake_llm import FakeModelServer, Reply, ToolCallSpec
from tests.support.fake_napcat import FakeNapCat, at, text
from tests.support.fixtures import ACCESS_TOKEN
from tests.support.model_bot import bot_with_model
from tests.support.timeline_db import TimelineDb, wait_for
from tests.support.waiting import until_async

SELF_ID = 46_601
GROUP, MEMBER = 8301, 9501
CHAT = "e2e-console"
TOKEN = "console-secret-for-tests"

# Every route behind the token, with a request that would be valid once signed in.
ROUTES: list[tuple[str, str]] = [
    ("GET", "/pallas/api/overview"),
    ("GET", "/pallas/api/chats"),
    ("GET", "/pallas/api/chats/1/messages"),
    ("GET", "/pallas/api/messages/1/explain"),
    ("GET", "/pallas/api/turns/1/trace"),
    ("GET", "/pallas/api/persons"),
    ("GET", "/pallas/api/persons/1"),
    ("POST", "/pallas/api/persons/1/lift?stream_id=1"),
    ("DELETE", "/pallas/api/notes/1"),
    ("POST", "/pallas/api/memory/1/forget"),
    ("GET", "/pallas/api/jobs"),
    ("GET", "/pallas/api/models"),
    ("GET", f"/pallas/api/promises?self_id={SELF_ID}"),
    ("GET", "/pallas/api/settings"),
    ("GET", "/pallas/api/settings/gate/1"),
    ("PUT", "/pallas/api/settings/gate/1"),
    ("GET", "/pallas/api/openapi.json"),
    ("GET", "/pallas/api/tools"),
    ("POST", "/pallas/api/tools/tool/web.fetch?on=false"),
    ("GET", "/pallas/tools"),
    ("GET", "/pallas/overview"),
    ("GET", "/pallas/sandbox"),
    ("POST", "/pallas/sandbox/试聊/say"),
    ("GET", "/pallas/sandbox/试聊/events"),
]


def answered_as_api(path: str) -> bool:
    """API routes (and the sandbox's own calls) answer 401; pages send to the login."""
    return path.startswith("/pallas/api") or path.startswith("/pallas/sandbox/")


def reply(words: str) -> Reply:
    return Reply("", (ToolCallSpec("reply", json.dumps({"text": words}, ensure_ascii=False)),))


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(default=reply("在")) as server:
        yield server


@pytest.fixture(scope="module")
async def bot(
    tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer
) -> AsyncIterator[BotProcess]:
    env = {"PALLAS_CONSOLE_TOKEN": TOKEN}
    async with bot_with_model(tmp_path_factory.mktemp("console"), model, CHAT, env=env) as bot:
        yield bot


@pytest.fixture(scope="module")
async def napcat(bot: BotProcess) -> AsyncIterator[FakeNapCat]:
    client = FakeNapCat(bot.ws_url, SELF_ID, ACCESS_TOKEN)
    client.answer_sends()
    await client.connect()
    yield client
    await client.close()


@pytest.fixture
async def http(bot: BotProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=bot.http_url, timeout=10) as client:
        yield client


BEARER = {"Authorization": f"Bearer {TOKEN}"}


def client_from(bot: BotProcess, source: str) -> httpx.AsyncClient:
    """A client whose socket comes from `source`: failed attempts are counted per address."""
    transport = httpx.AsyncHTTPTransport(local_address=source)
    return httpx.AsyncClient(base_url=bot.http_url, transport=transport, timeout=10)


_strangers = itertools.count()


@pytest.fixture
async def stranger(bot: BotProcess) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a loopback address of its own, for a test that tries wrong tokens."""
    n = next(_strangers)
    async with client_from(bot, f"127.0.{1 + n // 250}.{1 + n % 250}") as client:
        yield client


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_every_route_refuses_without_the_token(
    stranger: httpx.AsyncClient, method: str, path: str
) -> None:
    http = stranger
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        response = await http.request(method, path, headers=headers, json={})
        if answered_as_api(path):
            assert response.status_code == 401, (headers, response.text)
        else:  # a page sends the browser to the login
            assert response.status_code == 303
            assert response.headers["location"] == "/pallas/login"
    forged, expired = "1700000000.deadbeef", "1000000000." + "0" * 64
    for session in (forged, expired):
        http.cookies.clear()
        http.cookies.set("pallas_session", session)
        response = await http.request(method, path, json={})
        assert response.status_code == (401 if answered_as_api(path) else 303)


async def test_health_needs_no_token(http: httpx.AsyncClient) -> None:
    response = await http.get("/pallas/api/health")
    assert response.status_code == 200 and response.json()["ok"] is True


async def test_health_says_what_runs_behind_each_account(
    http: httpx.AsyncClient, napcat: FakeNapCat
) -> None:
    async def platform() -> Any:
        report = (await http.get("/pallas/api/health")).json()
        return report["platforms"].get(str(SELF_ID))

    await until_async(lambda: _known(platform))  # the first look may start the probe
    assert await platform() == {
        "implementation": "NapCat.Onebot 4.x",
        "capabilities": ["poke", "react"],
    }


async def _known(platform: Callable[[], Awaitable[Any]]) -> bool:
    found = await platform()
    return bool(found and found["capabilities"] is not None)


async def talk(
    napcat: FakeNapCat, timeline: TimelineDb, words: str, user: int = MEMBER
) -> dict[str, Any]:
    event = napcat.group_message(GROUP, user, [text(words)], nickname="<b>阿明</b>")
    await napcat.send_event(event)
    await wait_for(lambda: timeline.messages(event["message_id"]), timeout=10, what="stored")
    return event


async def test_a_script_reads_chats_lines_and_why_with_the_bearer_token(
    http: httpx.AsyncClient, napcat: FakeNapCat, bot: BotProcess
) -> None:
    timeline = TimelineDb(bot.db_path)
    event = await talk(napcat, timeline, "今天天气不错")  # nobody called the bot: dropped
    chats = (await http.get("/pallas/api/chats", headers=BEARER)).json()
    [chat] = [c for c in chats if c["external_id"] == str(GROUP)]
    lines = (
        await http.get(f"/pallas/api/chats/{chat['stream_id']}/messages", headers=BEARER)
    ).json()
    line = next(ln for ln in lines if ln["text"] == "今天天气不错")
    await wait_for(
        lambda: timeline.scalar(
            "SELECT COUNT(*) FROM event WHERE kind = 'gate_dropped' AND message_id = ?",
            line["message_id"],
        ),
        timeout=10,
        what="the gate's decision",
    )
    why = (await http.get(f"/pallas/api/messages/{line['message_id']}/explain", headers=BEARER))
    kinds = [e["kind"] for e in why.json()["events"]]
    assert "gate_dropped" in kinds and why.json()["turn"] is None
    assert event["message_id"]
    overview = (await http.get("/pallas/api/overview", headers=BEARER)).json()
    assert overview["heard_today"] >= 1 and len(overview["hours"]) == 24
    missing = await http.get("/pallas/api/messages/999999/explain", headers=BEARER)
    assert missing.status_code == 404


async def test_login_sets_a_cookie_and_changes_need_the_csrf_value(
    http: httpx.AsyncClient, bot: BotProcess, napcat: FakeNapCat
) -> None:
    timeline = TimelineDb(bot.db_path)
    await talk(napcat, timeline, "有人吗")
    stream_id = timeline.scalar("SELECT id FROM stream WHERE external_id = ?", str(GROUP))
    login = await http.post("/pallas/api/login", json={"token": TOKEN})
    assert login.status_code == 200
    assert "httponly" in login.headers["set-cookie"].lower()
    assert "samesite=strict" in login.headers["set-cookie"].lower()
    csrf = login.json()["csrf"]
    path = f"/pallas/api/settings/gate/{stream_id}"
    assert (await http.get(path)).status_code == 200  # reading needs only the cookie
    refused = await http.put(path, json={"max_replies_in_window": 3})
    assert refused.status_code == 403  # a page of another site could send the cookie
    saved = await http.put(path, json={"max_replies_in_window": 3}, headers={"X-CSRF-Token": csrf})
    assert saved.status_code == 200
    fields = {f["name"]: f for f in saved.json()["fields"]}
    assert fields["max_replies_in_window"]["value"] == 3
    assert fields["max_replies_in_window"]["overridden"] is True
    await http.post("/pallas/api/logout")
    http.cookies.clear()
    assert (await http.get(path)).status_code == 401


async def test_bad_settings_are_refused_with_the_field_named_and_nothing_saved(
    http: httpx.AsyncClient, bot: BotProcess, napcat: FakeNapCat
) -> None:
    timeline = TimelineDb(bot.db_path)
    await talk(napcat, timeline, "嗯嗯")
    stream_id = timeline.scalar("SELECT id FROM stream WHERE external_id = ?", str(GROUP))
    path = f"/pallas/api/settings/gate/{stream_id}"
    before = (await http.get(path, headers=BEARER)).json()
    for changes, field in (
        ({"ambient_probability": 2, "poke_limit": 1}, "ambient_probability"),
        ({"poke_limit": "many"}, "poke_limit"),
        ({"quiet_hours": ["25:00-26:00"]}, "quiet_hours"),
        ({"no_such_knob": 1}, "no_such_knob"),
    ):
        response = await http.put(path, json=changes, headers=BEARER)
        assert response.status_code == 422, response.text
        assert field in response.json()["detail"]["problems"]
    assert (await http.get(path, headers=BEARER)).json() == before  # nothing half-saved
    assert (await http.get("/pallas/api/settings/gate/999999", headers=BEARER)).status_code == 404
    assert (await http.get("/pallas/api/settings/nope/1", headers=BEARER)).status_code == 404


async def test_switches_set_through_the_api_apply_to_the_next_message(
    http: httpx.AsyncClient, bot: BotProcess, napcat: FakeNapCat, model: FakeModelServer
) -> None:
    timeline = TimelineDb(bot.db_path)
    await talk(napcat, timeline, "热身")
    sid = timeline.scalar("SELECT id FROM stream WHERE external_id = ?", str(GROUP))
    off = await http.put(f"/pallas/api/settings/gate/{sid}", json={"model_chat": False},
                         headers=BEARER)  # fmt: skip
    assert off.status_code == 200
    calls = len(model.requests_for(CHAT))
    event = napcat.group_message(GROUP, MEMBER, [at(SELF_ID), text(" 在吗")])
    await napcat.send_event(event)
    await wait_for(lambda: _reason(timeline, event) == "chat_off", timeout=10, what="chat_off")
    assert len(model.requests_for(CHAT)) == calls  # no model call at all

    sections = {s["key"] for s in (await http.get("/pallas/api/settings", headers=BEARER)).json()}
    assert {"gate", "features", "notices", "character"} <= sections
    quiet = await http.put(f"/pallas/api/settings/features/{sid}", json={"repeat": False},
                           headers=BEARER)  # fmt: skip
    assert quiet.status_code == 200
    sends = len(napcat.calls_to("send_group_msg"))
    for user in (MEMBER, MEMBER + 1):
        await talk(napcat, timeline, "复读机启动", user)
    second = napcat.group_message(GROUP, MEMBER + 2, [text("看不到复读")])
    await napcat.send_event(second)
    await wait_for(lambda: timeline.messages(second["message_id"]), timeout=10, what="stored")
    assert len(napcat.calls_to("send_group_msg")) == sends  # switched off: nothing repeated
    repeats = timeline.scalar(
        "SELECT COUNT(*) FROM event WHERE kind = 'stage_handled' AND reason = 'repeated'"
    )
    assert repeats == 0


async def test_reply_limits_changed_in_the_console_apply_to_the_next_turn(
    http: httpx.AsyncClient, bot: BotProcess, napcat: FakeNapCat, model: FakeModelServer
) -> None:
    timeline, group = TimelineDb(bot.db_path), GROUP + 1
    changed = await http.put("/pallas/api/settings/agent/global", json={"max_bubbles": 1},
                             headers=BEARER)  # fmt: skip
    assert changed.status_code == 200
    sends = len(napcat.calls_to("send_group_msg"))
    model.script(CHAT, reply("第一句。\n第二句。\n第三句。"))
    event = napcat.group_message(group, MEMBER, [at(SELF_ID), text(" 说三句")])
    await napcat.send_event(event)
    await wait_for(lambda: len(napcat.calls_to("send_group_msg")) > sends, timeout=20, what="reply")
    await wait_for(
        lambda: timeline.scalar("SELECT COUNT(*) FROM event WHERE kind = 'reply_queued'"),
        timeout=10,
        what="the reply's event",
    )
    payload = timeline.scalar(
        "SELECT payload FROM event WHERE kind = 'reply_queued' ORDER BY id DESC LIMIT 1"
    )
    assert len(json.loads(payload)["bubbles"]) == 1  # one bubble, as the console now says
    await http.put("/pallas/api/settings/agent/global", json={"max_bubbles": 4}, headers=BEARER)


async def test_the_context_budget_changed_in_the_console_applies_to_the_next_turn(
    http: httpx.AsyncClient, bot: BotProcess, napcat: FakeNapCat
) -> None:
    timeline, group = TimelineDb(bot.db_path), GROUP + 5
    for n in range(10):  # history nobody asked the bot about
        event = napcat.group_message(group, MEMBER, [text(f"第{n}句闲聊，" + "今天天气不错" * 8)])
        await napcat.send_event(event)
        await wait_for(lambda e=event: timeline.messages(e["message_id"]), what="stored")

    async def dropped_after(words: str) -> int:
        kind = "SELECT COUNT(*) FROM event WHERE kind = 'context_assembled'"
        before = timeline.scalar(kind)
        await napcat.send_event(napcat.group_message(group, MEMBER, [at(SELF_ID), text(words)]))
        await wait_for(lambda: timeline.scalar(kind) > before, what="the context assembled")
        payload = timeline.scalar(
            "SELECT payload FROM event WHERE kind = 'context_assembled' ORDER BY id DESC LIMIT 1"
        )
        return int(json.loads(payload)["dropped_lines"])

    assert await dropped_after(" 你看到几句") == 0  # the agent file's 3000 holds them all
    changed = await http.put("/pallas/api/settings/agent/global",
                             json={"context_token_budget": 200}, headers=BEARER)  # fmt: skip
    assert changed.status_code == 200
    try:
        assert await dropped_after(" 现在呢") > 0  # the oldest history went first
    finally:
        await http.put("/pallas/api/settings/agent/global", json={"context_token_budget": 3000},
                       headers=BEARER)  # fmt: skip


def _reason(timeline: TimelineDb, event: dict[str, Any]) -> str | None:
    return timeline.scalar(
        "SELECT e.reason FROM event e JOIN message m ON m.id = e.message_id "
        "WHERE e.kind = 'gate_dropped' AND m.platform_message_id = ?",
        str(event["message_id"]),
    )


async def test_tools_are_listed_and_switched_except_the_essential_ones(
    http: httpx.AsyncClient,
) -> None:
    def state(items: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
        return next(i for i in items if i["kind"] == kind and i["name"] == name)

    items = (await http.get("/pallas/api/tools", headers=BEARER)).json()
    assert state(items, "tool", "web.fetch")["enabled"] is True
    assert state(items, "tool", "tools.find")["essential"] is True
    off = await http.post("/pallas/api/tools/tool/web.fetch?on=false", headers=BEARER)
    assert off.status_code == 200
    items = (await http.get("/pallas/api/tools", headers=BEARER)).json()
    assert state(items, "tool", "web.fetch")["enabled"] is False
    refused = await http.post("/pallas/api/tools/tool/tools.find?on=false", headers=BEARER)
    assert refused.status_code == 400 and "必需" in refused.json()["detail"]
    for path in ("/pallas/api/tools/tool/no.such?on=false", "/pallas/api/tools/kind/x?on=true",
                 "/pallas/api/tools/skill/no-such-skill?on=false"):  # fmt: skip
        assert (await http.post(path, headers=BEARER)).status_code == 400
    await http.post("/pallas/api/tools/tool/web.fetch?on=true", headers=BEARER)


async def test_failed_logins_are_rate_limited(stranger: httpx.AsyncClient) -> None:
    http = stranger
    codes = [
        (await http.post("/pallas/api/login", json={"token": f"guess-{n}"})).status_code
        for n in range(7)
    ]
    assert codes[:5] == [401] * 5 and codes[5:] == [429, 429]
    # Even the right token waits out the window now: guessing buys nothing.
    assert (await http.post("/pallas/api/login", json={"token": TOKEN})).status_code == 429
    assert (await http.get("/pallas/api/overview", headers=BEARER)).status_code == 429
    # No proxy is trusted by default: a forwarding header names no one and buys nothing.
    for n in range(30):
        forged = {"X-Forwarded-For": f"10.2.{n}.1"}
        answer = await http.post("/pallas/api/login", json={"token": TOKEN}, headers=forged)
        assert answer.status_code == 429


async def test_wrong_bearer_tokens_are_counted_like_failed_logins(
    stranger: httpx.AsyncClient, http: httpx.AsyncClient
) -> None:
    wrong = {"Authorization": "Bearer guess"}
    codes = [(await stranger.get("/pallas/api/chats", headers=wrong)).status_code for _ in range(6)]
    assert codes == [401] * 5 + [429]
    assert (await stranger.get("/pallas/api/chats", headers=BEARER)).status_code == 429
    assert (await http.get("/pallas/api/chats", headers=BEARER)).status_code == 200  # others


async def test_the_openapi_document_describes_the_console_routes(
    http: httpx.AsyncClient,
) -> None:
    schema = (await http.get("/pallas/api/openapi.json", headers=BEARER)).json()
    paths = set(schema["paths"])
    assert {"/pallas/api/overview", "/pallas/api/settings/{key}/{scope_id}"} <= paths
    assert all(path.startswith("/pallas/") for path in paths)


async def test_retention_is_a_console_section_and_its_job_is_scheduled(
    http: httpx.AsyncClient, bot: BotProcess
) -> None:
    sections = (await http.get("/pallas/api/settings", headers=BEARER)).json()
    assert "retention" in {s["key"] for s in sections}
    shown = (await http.get("/pallas/api/settings/retention/global", headers=BEARER)).json()
    defaults = {f["name"]: f["default"] for f in shown["fields"]}
    assert defaults == {"messages_days": 180, "events_days": 90, "model_calls_days": 90,
                        "call_log_days": 30}  # fmt: skip
    path = "/pallas/api/settings/retention/global"
    refused = await http.put(path, json={"events_days": 3}, headers=BEARER)
    assert refused.status_code == 422
    assert "events_days" in refused.json()["detail"]["problems"]
    try:
        changed = await http.put(path, json={"messages_days": 365}, headers=BEARER)
        assert changed.status_code == 200
        fields = {f["name"]: f for f in changed.json()["fields"]}
        assert fields["messages_days"]["value"] == 365 and fields["messages_days"]["overridden"]
    finally:
        await http.put(path, json={"messages_days": 180}, headers=BEARER)
    timeline = TimelineDb(bot.db_path)
    # The hourly run is scheduled from start-up (pending until its hour, or already run).
    assert timeline.scalar("SELECT COUNT(*) FROM job WHERE kind = 'retention.prune'") >= 1
