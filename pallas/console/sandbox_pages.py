"""The sandbox page: a group chat with the bot in the browser, through the real ingress,
stages, gate, agent and outbox (pallas/platform/sandbox.py). The page posts what a pretend
member says and listens to an event stream for the bot's bubbles, which arrive at the
outbox's own pace."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, Field, ValidationError

from pallas.console.pages import Pages, guest_or_login
from pallas.console.setup_gaps import NO_NAPCAT, setup_gaps
from pallas.console.tools_view import inventory
from pallas.core.inbound import StreamKind
from pallas.platform.sandbox import SANDBOX, SANDBOX_SELF_ID, SandboxLine, sandbox_message
from pallas.store import console_reads
from pallas.store.conversation import chat_of

CHAT_NAME = re.compile(r"^[0-9A-Za-z_\-\u4e00-\u9fff]{1,32}$")
MAX_BODY_BYTES = 16 * 1024
KEEPALIVE_S = 15.0
MEMBERS = (("sandbox-1", "小明"), ("sandbox-2", "小红"), ("sandbox-3", "小刚"))


class Said(BaseModel):
    member: str = Field(pattern=r"^sandbox-[0-9]{1,3}$")
    name: str = Field(min_length=1, max_length=32)
    text: str = Field(min_length=1, max_length=2000)
    at_bot: bool = False


def chat_name(value: str) -> str:
    if not CHAT_NAME.match(value):
        raise HTTPException(404, "沙盒名只能用字母、数字、汉字、-、_，最多 32 个")
    return value


def sandbox_routes(pages: Pages) -> APIRouter:
    deps = pages.deps
    router = APIRouter(prefix="/pallas/sandbox", include_in_schema=False)

    @router.get("")
    async def sandbox_page(request: Request, chat: str = "试聊") -> Response:
        guest = await guest_or_login(pages, request)
        if isinstance(guest, Response):
            return guest
        name = chat_name(chat)
        stream_id = await chat_of(deps.engine, SANDBOX, SANDBOX_SELF_ID, StreamKind.GROUP, name)
        lines = []
        if stream_id is not None:
            lines = await console_reads.chat_lines(deps.engine, stream_id, None, 100)
        gaps = setup_gaps(deps.catalog, deps.bots(), await inventory(deps.tools))
        gaps = [gap for gap in gaps if gap is not NO_NAPCAT]  # the sandbox needs no NapCat
        return pages.render(
            "sandbox.html", guest, chat=name, lines=lines, members=MEMBERS, gaps=gaps
        )

    @router.post("/{chat}/say")
    async def say(request: Request, chat: str) -> dict[str, Any]:
        await pages.guest(request)
        said = await _said(request)
        sandbox = deps.sandbox
        message = sandbox_message(chat_name(chat), said.member, said.name, said.text,
                                  said.at_bot, sandbox.ids.next(), deps.clock())  # fmt: skip
        result = await deps.ingress.accept(message)
        return {"message_id": message.platform_message_id, "outcome": result.outcome.value}

    @router.get("/{chat}/events")
    async def events(request: Request, chat: str) -> StreamingResponse:
        await pages.guest(request)
        queue = deps.hub.listen(chat_name(chat))
        return StreamingResponse(
            _stream(request, chat, queue, deps.hub), media_type="text/event-stream"
        )

    return router


async def _said(request: Request) -> Said:
    """The posted line, read within MAX_BODY_BYTES (a megabyte is refused unread)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise HTTPException(413, "消息太长了")
    try:
        return Said.model_validate_json(body)
    except ValidationError as exc:
        where = str(exc.errors()[0]["loc"][0]) if exc.errors() else "body"
        raise HTTPException(422, f"{where} 不合法（每句最多 2000 字）") from None


async def _stream(
    request: Request, chat: str, queue: asyncio.Queue[SandboxLine], hub: Any
) -> AsyncIterator[str]:
    try:
        yield ": listening\n\n"
        while not await request.is_disconnected():
            try:
                line = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
            except TimeoutError:
                yield ": keepalive\n\n"
                continue
            yield f"data: {json.dumps(asdict(line), ensure_ascii=False, default=str)}\n\n"
    finally:
        hub.leave(chat, queue)
