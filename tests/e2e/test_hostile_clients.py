"""The running bot against a hostile client on its own network: huge bodies with and without
the token, forged forwarding headers, hundreds of half-sent requests, ids past 64 bits.
Everything goes through the bot's real server socket (docs/security.md)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from pallas.platform.http_server import HEAD_TIMEOUT_S
from tests.support.bot_process import BotProcess
from tests.support.raw_http import closed_within, open_from, request_head, stream_body

TOKEN = "hostile-clients-console-token"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
PROXY = "127.0.0.4"  # the one reverse proxy this bot trusts
MB = 1024 * 1024
MEMORY_BUDGET = 40 * MB
HUGE = 120 * MB  # each body, streamed chunked or declared


@pytest.fixture(scope="module")
async def bot(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BotProcess]:
    env = {"PALLAS_CONSOLE_TOKEN": TOKEN, "PALLAS_TRUSTED_PROXIES": json.dumps([PROXY])}
    process = BotProcess(tmp_path_factory.mktemp("hostile"), env=env)
    process.start()
    try:
        await process.wait_ready()
        yield process
    finally:
        process.stop()


def client_from(bot: BotProcess, source: str) -> httpx.AsyncClient:
    """A client whose socket comes from `source` (any loopback address)."""
    transport = httpx.AsyncHTTPTransport(local_address=source)
    return httpx.AsyncClient(base_url=bot.http_url, transport=transport, timeout=10)


def status_of(bot: BotProcess, key: str) -> int:
    """A /proc/<pid>/status figure, in bytes."""
    assert bot._proc is not None
    for line in Path(f"/proc/{bot._proc.pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(key)


def reset_peak_memory(bot: BotProcess) -> None:
    assert bot._proc is not None
    Path(f"/proc/{bot._proc.pid}/clear_refs").write_text("5")  # VmHWM back to VmRSS


WITHOUT_TOKEN = [
    ("POST", "/pallas/api/login"),
    ("POST", "/pallas/login"),
    ("PUT", "/pallas/api/settings/gate/1"),
    ("POST", "/pallas/api/tools/tool/web.fetch?on=false"),
    ("POST", "/pallas/sandbox/试聊/say"),
    ("POST", "/pallas/settings/gate/1"),
    ("POST", "/onebot/v11/http"),
    ("POST", "/no/such/route"),
]


async def test_huge_bodies_are_refused_before_they_are_read(bot: BotProcess) -> None:
    reset_peak_memory(bot)
    before = status_of(bot, "VmRSS")
    answers = []
    for method, path in WITHOUT_TOKEN:
        for chunked in (True, False):
            answers.append(await stream_body(bot.port, method, path, HUGE, chunked=chunked))
    signed_in = await stream_body(bot.port, "PUT", "/pallas/api/settings/gate/1", HUGE,
                                  headers=BEARER)  # fmt: skip
    grown = status_of(bot, "VmHWM") - before
    assert {a.status for a in answers} <= {401, 404, 405, 413, 303}, answers
    assert signed_in.status == 413
    assert all(a.body_sent < HUGE for a in [*answers, signed_in]), answers
    assert grown < MEMORY_BUDGET, f"grew by {grown / MB:.1f} MB"
    assert (await bot.health())["ok"] is True


async def test_forged_forwarding_buys_no_guesses_and_locks_no_one_else_out(
    bot: BotProcess,
) -> None:
    async with client_from(bot, "127.0.0.2") as attacker:
        codes = []
        for n in range(30):
            forged = {"X-Forwarded-For": "127.0.0.3" if n % 2 else f"10.1.{n}.{n}"}
            answer = await attacker.post("/pallas/api/login", json={"token": f"guess-{n}"},
                                         headers=forged)  # fmt: skip
            codes.append(answer.status_code)
    assert codes[:5] == [401] * 5 and set(codes[5:]) == {429}
    async with client_from(bot, "127.0.0.3") as owner:  # the address the attacker named
        assert (await owner.post("/pallas/api/login", json={"token": TOKEN})).status_code == 200


async def test_a_trusted_proxy_forwards_the_clients_own_address(bot: BotProcess) -> None:
    async with client_from(bot, PROXY) as proxy:
        guesser = {"X-Forwarded-For": "203.0.113.7"}
        codes = [
            (
                await proxy.post("/pallas/api/login", json={"token": "no"}, headers=guesser)
            ).status_code
            for _ in range(6)
        ]
        assert codes == [401] * 5 + [429]
        owner = {"X-Forwarded-For": "203.0.113.8"}  # another client behind the same proxy
        answer = await proxy.post("/pallas/api/login", json={"token": TOKEN}, headers=owner)
        assert answer.status_code == 200


async def test_the_session_cookie_is_secure_when_the_console_is_served_over_https(
    bot: BotProcess,
) -> None:
    https = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}
    async with client_from(bot, PROXY) as proxy:
        answer = await proxy.post("/pallas/api/login", json={"token": TOKEN}, headers=https)
    assert "secure" in answer.headers["set-cookie"].lower()
    async with client_from(bot, "127.0.0.5") as direct:  # not a proxy: its header is ignored
        answer = await direct.post("/pallas/api/login", json={"token": TOKEN}, headers=https)
    cookie = answer.headers["set-cookie"].lower()
    assert "httponly" in cookie and "secure" not in cookie.replace("httponly", "")


async def test_half_open_connections_are_dropped_while_requests_are_served(
    bot: BotProcess,
) -> None:
    held = [await open_from(bot.port, "127.0.0.7") for _ in range(300)]
    for n, (_, writer) in enumerate(held):
        writer.write(b"GET /pallas/api/health HTTP/1.1\r\nHost: x\r\n" if n % 3 else b"G")
    await asyncio.gather(*(writer.drain() for _, writer in held))
    for _ in range(5):  # served at once, through all of them
        assert (await bot.health())["ok"] is True
    closed = await asyncio.gather(*(closed_within(r, HEAD_TIMEOUT_S + 15) for r, _ in held))
    assert sum(closed) == 300
    for _, writer in held:
        writer.close()


# Every route with a path parameter, and where its ids go.
ID_ROUTES = [
    ("GET", "/pallas/api/chats/{id}/messages"),
    ("GET", "/pallas/api/chats/1/messages?before={id}"),
    ("GET", "/pallas/api/messages/{id}/explain"),
    ("GET", "/pallas/api/turns/{id}/trace"),
    ("GET", "/pallas/api/persons/{id}"),
    ("POST", "/pallas/api/persons/{id}/lift?stream_id=1"),
    ("POST", "/pallas/api/persons/1/lift?stream_id={id}"),
    ("DELETE", "/pallas/api/notes/{id}"),
    ("POST", "/pallas/api/memory/{id}/forget"),
    ("PUT", "/pallas/api/behaviors/{id}"),
    ("DELETE", "/pallas/api/learned/pairs/{id}"),
    ("POST", "/pallas/api/learned/pairs/{id}/ban"),
    ("DELETE", "/pallas/api/learned/bans/{id}"),
    ("DELETE", "/pallas/api/tasks/reminders/{id}"),
    ("DELETE", "/pallas/api/tasks/research/{id}"),
    ("GET", "/pallas/api/knowledge/docs/{id}/chunks"),
    ("DELETE", "/pallas/api/knowledge/docs/{id}"),
    ("GET", "/pallas/api/slang/{id}"),
    ("PUT", "/pallas/api/slang/{id}/terms"),
    ("DELETE", "/pallas/api/slang/{id}/terms?term=x"),
    ("DELETE", "/pallas/api/slang/samples/{id}"),
    ("GET", "/pallas/api/stickers/{id}/file"),
    ("PUT", "/pallas/api/stickers/{id}"),
    ("DELETE", "/pallas/api/stickers/{id}"),
    ("GET", "/pallas/api/settings/gate/{id}"),
    ("PUT", "/pallas/api/settings/gate/{id}"),
    ("GET", "/pallas/api/settings/character/{id}"),
    ("GET", "/pallas/api/settings/{id}/global"),
    ("POST", "/pallas/api/tools/tool/{id}?on=true"),
    ("POST", "/pallas/api/tools/{id}/x?on=true"),
    ("GET", "/pallas/chats/{id}"),
    ("GET", "/pallas/chats/1?before={id}"),
    ("GET", "/pallas/messages/{id}"),
    ("GET", "/pallas/turns/{id}"),
    ("GET", "/pallas/persons/{id}"),
    ("GET", "/pallas/settings/gate/{id}"),
    ("GET", "/pallas/settings/{id}/global"),
    ("GET", "/pallas/sandbox?chat={id}"),
    ("GET", "/pallas/static/{id}"),
    ("GET", "/pallas/pages/{id}"),
    ("GET", "/pallas/pages/{id}/script.js"),
]
HUGE_IDS = [str(2**63), str(2**64), "9" * 23, "9" * 5_000, "-" + "9" * 30]
ANSWERED = {200, 400, 404, 422}  # 200/400: a route that takes any name (a tool's) says so


async def test_ids_past_64_bits_are_404_or_422_and_keep_the_connection(bot: BotProcess) -> None:
    reader, writer = await open_from(bot.port)
    for method, template in ID_ROUTES:
        for huge in HUGE_IDS:
            path = template.replace("{id}", huge)
            writer.write(request_head(method, path, {**BEARER, "Content-Length": "2"}) + b"{}")
            status, body = await _answer(reader)
            assert status in ANSWERED, (method, path[:80], status, body[:200])
            assert b"Traceback" not in body
            if "{id}" in template.split("?")[0] and not template.startswith(
                ("/pallas/api/tools", "/pallas/sandbox")
            ):
                assert status in {404, 422}, (method, path[:80], status)
    writer.close()  # one keep-alive connection carried every request: none was dropped


async def test_every_path_parameter_of_the_api_is_tried(bot: BotProcess) -> None:
    async with httpx.AsyncClient(base_url=bot.http_url, headers=BEARER) as http:
        schema = (await http.get("/pallas/api/openapi.json")).json()
    with_ids = {path for path in schema["paths"] if "{" in path}
    tried = {_shape(template) for _, template in ID_ROUTES}
    assert with_ids <= tried, with_ids - tried


def _shape(template: str) -> str:
    """The OpenAPI spelling of a tried route: its path, parameters by name."""
    path = template.split("?")[0]
    names = {
        "/pallas/api/chats/{id}/messages": "/pallas/api/chats/{stream_id}/messages",
        "/pallas/api/messages/{id}/explain": "/pallas/api/messages/{message_id}/explain",
        "/pallas/api/turns/{id}/trace": "/pallas/api/turns/{turn_id}/trace",
        "/pallas/api/persons/{id}": "/pallas/api/persons/{person_id}",
        "/pallas/api/persons/{id}/lift": "/pallas/api/persons/{person_id}/lift",
        "/pallas/api/notes/{id}": "/pallas/api/notes/{note_id}",
        "/pallas/api/memory/{id}/forget": "/pallas/api/memory/{entry_id}/forget",
        "/pallas/api/settings/gate/{id}": "/pallas/api/settings/{key}/{scope_id}",
        "/pallas/api/tools/tool/{id}": "/pallas/api/tools/{kind}/{name}",
        "/pallas/api/behaviors/{id}": "/pallas/api/behaviors/{entry_id}",
        "/pallas/api/learned/pairs/{id}": "/pallas/api/learned/pairs/{pair_id}",
        "/pallas/api/learned/pairs/{id}/ban": "/pallas/api/learned/pairs/{pair_id}/ban",
        "/pallas/api/learned/bans/{id}": "/pallas/api/learned/bans/{ban_id}",
        "/pallas/api/tasks/reminders/{id}": "/pallas/api/tasks/reminders/{reminder_id}",
        "/pallas/api/tasks/research/{id}": "/pallas/api/tasks/research/{research_id}",
        "/pallas/api/knowledge/docs/{id}/chunks": "/pallas/api/knowledge/docs/{doc_id}/chunks",
        "/pallas/api/knowledge/docs/{id}": "/pallas/api/knowledge/docs/{doc_id}",
        "/pallas/api/slang/{id}": "/pallas/api/slang/{stream_id}",
        "/pallas/api/slang/{id}/terms": "/pallas/api/slang/{stream_id}/terms",
        "/pallas/api/slang/samples/{id}": "/pallas/api/slang/samples/{sample_id}",
        "/pallas/api/stickers/{id}": "/pallas/api/stickers/{sha256}",
        "/pallas/api/stickers/{id}/file": "/pallas/api/stickers/{sha256}/file",
    }
    return names.get(path, path)


async def _answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 15)).decode("latin-1")
    length = next(
        int(line.split(":", 1)[1]) for line in head.split("\r\n")
        if line.lower().startswith("content-length:")
    )  # fmt: skip
    assert "connection: close" not in head.lower(), head
    return int(head.split(" ", 2)[1]), await reader.readexactly(length)
