"""The outlet over a real WebSocket: NoneBot's app served in-process, a fake NapCat connected.

Each call goes the whole real way: outlet -> adapter -> WebSocket frame -> fake NapCat ->
answer frame -> adapter result store -> outlet. Each test uses its own bot account id.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import nonebot
import pytest
import uvicorn
from loguru import logger

from pallas.core.actions import REACTIONS, Capability, reaction_id
from pallas.core.inbound import InboundMessage, Segment, SegmentKind, StreamKey, StreamKind
from pallas.platform.onebot.adapter import PallasOneBotAdapter
from pallas.platform.onebot.outlet import PROBE_RETRY_S, OneBotOutlet, capabilities_for
from tests.support.bot_process import free_port
from tests.support.fake_napcat import FakeNapCat, next_message_id
from tests.support.timeline_db import wait_for

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
_self_ids = itertools.count(60_001)


class Recorder:
    """Stands in for the ingress: keeps what the outlet records."""

    def __init__(self) -> None:
        self.items: list[InboundMessage] = []

    async def accept(self, item: InboundMessage) -> object:
        self.items.append(item)
        return None


class NapCat(FakeNapCat):
    """Answers sends with fresh message ids."""

    def __init__(self, ws_url: str, self_id: int) -> None:
        super().__init__(ws_url, self_id)
        self.sent_ids: list[int] = []
        self.responders["send_group_msg"] = self._sent
        self.responders["send_private_msg"] = self._sent

    def _sent(self, _params: dict[str, Any]) -> dict[str, int]:
        self.sent_ids.append(next_message_id())
        return {"message_id": self.sent_ids[-1]}


@pytest.fixture(scope="module")
async def ws_url() -> AsyncIterator[str]:
    """NoneBot's ASGI app on a loopback port (its lifespan already runs under nonebug)."""
    port = free_port()
    config = uvicorn.Config(
        nonebot.get_asgi(), host="127.0.0.1", port=port, lifespan="off", log_level="warning"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    await wait_for(lambda: server.started, what="in-process server")
    yield f"ws://127.0.0.1:{port}/onebot/v11/ws"
    server.should_exit = True
    await task


@pytest.fixture
async def connect(ws_url: str) -> AsyncIterator[Callable[..., Any]]:
    """Connect fake NapCats; each one is closed (and its bot gone) after the test."""
    clients: list[NapCat] = []

    async def _connect(self_id: int | None = None, app_name: str | None = None) -> NapCat:
        client = NapCat(ws_url, self_id or next(_self_ids))
        if app_name is not None:
            client.responders["get_version_info"] = lambda _p: {"app_name": app_name}
        await client.connect(lifecycle=False)
        clients.append(client)
        await wait_for(lambda: str(client.self_id) in nonebot.get_bots(), what="bot connected")
        return client

    yield _connect
    for client in clients:
        if client.is_open:
            await disconnect(client)


async def disconnect(client: FakeNapCat) -> None:
    await client.close()
    await wait_for(lambda: str(client.self_id) not in nonebot.get_bots(), what="bot gone")


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def outlet(recorder: Recorder) -> OneBotOutlet:
    return OneBotOutlet(recorder, clock=lambda: NOW)


@pytest.fixture
def warnings() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="WARNING")
    yield lines
    logger.remove(sink)


def group(napcat: FakeNapCat, group_id: str = "700") -> StreamKey:
    return StreamKey("qq", str(napcat.self_id), StreamKind.GROUP, group_id)


def private(napcat: FakeNapCat, user_id: str = "42") -> StreamKey:
    return StreamKey("qq", str(napcat.self_id), StreamKind.PRIVATE, user_id)


def wire(params: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(json.dumps(params["message"]))


HELLO = (Segment(SegmentKind.AT, target="42"), Segment(SegmentKind.TEXT, text=" 你好"))


# Sending ------------------------------------------------------------------------------------


async def test_send_to_a_group_is_a_segment_array_and_is_recorded(
    connect: Any, outlet: OneBotOutlet, recorder: Recorder
) -> None:
    napcat = await connect()
    stream = group(napcat)
    message_id = await outlet.send(stream, HELLO)
    assert message_id == str(napcat.sent_ids[-1])
    [params] = napcat.calls_to("send_group_msg")
    assert params["group_id"] == 700
    assert wire(params) == [
        {"type": "at", "data": {"qq": "42"}},
        {"type": "text", "data": {"text": " 你好"}},
    ]
    [record] = recorder.items
    assert record.stream == stream and record.platform_message_id == message_id
    assert record.from_bot and record.time == NOW and record.text == " 你好"
    assert record.segments == HELLO and record.reply_to is None


async def test_send_to_a_private_chat(
    connect: Any, outlet: OneBotOutlet, recorder: Recorder
) -> None:
    napcat = await connect()
    message_id = await outlet.send(private(napcat), [Segment(SegmentKind.TEXT, text="嗯")])
    assert message_id is not None
    [params] = napcat.calls_to("send_private_msg")
    assert params["user_id"] == 42
    assert wire(params) == [{"type": "text", "data": {"text": "嗯"}}]
    assert napcat.calls_to("send_group_msg") == []
    assert [r.platform_message_id for r in recorder.items] == [message_id]


async def test_11_a_reply_in_a_temporary_chat_names_the_group_it_came_through(
    connect: Any, recorder: Recorder
) -> None:
    napcat = await connect()
    routes = {private(napcat, "43"): "500"}

    async def route(stream: StreamKey) -> str | None:
        return routes.get(stream)

    outlet = OneBotOutlet(recorder, clock=lambda: NOW, route=route)
    assert await outlet.send(private(napcat, "43"), [Segment(SegmentKind.TEXT, text="好的")])
    assert await outlet.send(private(napcat, "42"), [Segment(SegmentKind.TEXT, text="嗯")])
    temp, friend = napcat.calls_to("send_private_msg")
    assert (temp["user_id"], temp["group_id"]) == (43, 500)
    assert friend["user_id"] == 42 and "group_id" not in friend


@pytest.mark.parametrize("kind", [StreamKind.GROUP, StreamKind.PRIVATE])
async def test_a_quoted_send_starts_with_a_reply_segment(
    connect: Any, outlet: OneBotOutlet, recorder: Recorder, kind: StreamKind
) -> None:
    napcat = await connect()
    stream = group(napcat) if kind is StreamKind.GROUP else private(napcat)
    message_id = await outlet.send(stream, HELLO, quote="-123456")
    assert message_id is not None
    [params] = napcat.calls_to(f"send_{kind}_msg")
    assert wire(params) == [
        {"type": "reply", "data": {"id": "-123456"}},
        {"type": "at", "data": {"qq": "42"}},
        {"type": "text", "data": {"text": " 你好"}},
    ]
    [record] = recorder.items
    # The same shape translate.py gives NapCat's echo of this message.
    assert record.reply_to == "-123456"
    assert record.segments[0] == Segment(SegmentKind.REPLY, target="-123456")
    assert record.text == " 你好"


async def test_a_quote_that_is_no_message_id_is_dropped_and_the_message_sent(
    connect: Any, outlet: OneBotOutlet, warnings: list[str]
) -> None:
    napcat = await connect()
    assert await outlet.send(group(napcat), HELLO, quote="poke:1:2:3") is not None
    [params] = napcat.calls_to("send_group_msg")
    assert [s["type"] for s in wire(params)] == ["at", "text"]
    assert any("cannot quote" in line for line in warnings)


async def test_a_refused_send_returns_none_and_records_nothing(
    connect: Any, outlet: OneBotOutlet, recorder: Recorder, warnings: list[str]
) -> None:
    napcat = await connect()
    napcat.failing.add("send_group_msg")
    assert await outlet.send(group(napcat), HELLO) is None
    assert recorder.items == []
    assert any("send_group_msg to group:700 failed" in line for line in warnings)


async def test_an_unanswered_send_times_out_to_none(
    connect: Any, outlet: OneBotOutlet, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = nonebot.get_adapter(PallasOneBotAdapter)
    monkeypatch.setattr(adapter.config, "api_timeout", 0.3)
    napcat = await connect()
    napcat.unanswered.add("send_group_msg")
    assert await outlet.send(group(napcat), HELLO) is None
    assert recorder.items == []


async def test_an_empty_message_is_not_sent(connect: Any, outlet: OneBotOutlet) -> None:
    napcat = await connect()
    assert await outlet.send(group(napcat), []) is None
    assert napcat.calls_to("send_group_msg") == []


# Poking -------------------------------------------------------------------------------------


async def test_poke_in_a_group_and_in_a_private_chat(
    connect: Any, outlet: OneBotOutlet, recorder: Recorder
) -> None:
    napcat = await connect()
    assert await outlet.poke(group(napcat), "42") is True
    assert await outlet.poke(private(napcat), "42") is True
    assert napcat.calls_to("group_poke") == [{"group_id": 700, "user_id": 42}]
    assert napcat.calls_to("friend_poke") == [{"user_id": 42}]
    assert [(r.is_poke, r.from_bot, r.mentions) for r in recorder.items] == [
        (True, True, ("42",)),
        (True, True, ("42",)),
    ]


async def test_a_refused_poke_is_false_and_not_recorded(
    connect: Any, outlet: OneBotOutlet, recorder: Recorder
) -> None:
    napcat = await connect()
    napcat.failing.add("group_poke")
    assert await outlet.poke(group(napcat), "42") is False
    assert await outlet.poke(group(napcat), "not-a-user") is False
    assert len(napcat.calls_to("group_poke")) == 1
    assert recorder.items == []


# Reacting -----------------------------------------------------------------------------------


async def test_react_sends_the_face_id_of_the_reaction(
    connect: Any, outlet: OneBotOutlet, recorder: Recorder
) -> None:
    napcat = await connect()
    assert await outlet.react(group(napcat), "-2147480000", "笑哭") is True
    assert napcat.calls_to("set_msg_emoji_like") == [{"message_id": -2147480000, "emoji_id": "182"}]
    assert recorder.items == []  # the caller writes the audit event


async def test_an_unknown_reaction_or_message_id_calls_nothing(
    connect: Any, outlet: OneBotOutlet, warnings: list[str]
) -> None:
    napcat = await connect()
    assert await outlet.react(group(napcat), "123", "开心到飞起") is False
    assert await outlet.react(group(napcat), "poke:1:2:3", "赞") is False
    assert napcat.calls_to("set_msg_emoji_like") == []
    assert any("unknown reaction" in line for line in warnings)


async def test_a_refused_reaction_is_false_without_raising(
    connect: Any, outlet: OneBotOutlet, warnings: list[str]
) -> None:
    napcat = await connect()
    napcat.failing.add("set_msg_emoji_like")
    assert await outlet.react(group(napcat), "123", "赞") is False
    assert any("set_msg_emoji_like 赞 on 123 in group:700 failed" in line for line in warnings)


# Capabilities -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("app_name", "expected"),
    [
        ("NapCat.Onebot", {Capability.POKE, Capability.REACT}),
        ("napcat", {Capability.POKE, Capability.REACT}),
        ("LLOneBot", {Capability.POKE}),
        ("Lagrange.OneBot", {Capability.POKE}),
        ("go-cqhttp", set()),
        ("", set()),
    ],
)
async def test_capabilities_follow_the_reported_app_name(
    connect: Any, outlet: OneBotOutlet, app_name: str, expected: set[Capability]
) -> None:
    assert capabilities_for(app_name) == expected
    napcat = await connect(app_name=app_name)
    assert await outlet.capabilities(str(napcat.self_id)) == expected


async def test_capabilities_are_asked_once_per_connection(
    connect: Any, outlet: OneBotOutlet
) -> None:
    napcat = await connect()
    self_id = str(napcat.self_id)
    results = await asyncio.gather(*(outlet.capabilities(self_id) for _ in range(3)))
    assert await outlet.capabilities(self_id) == {Capability.POKE, Capability.REACT}
    assert all(r == {Capability.POKE, Capability.REACT} for r in results)
    assert len(napcat.calls_to("get_version_info")) == 1


async def test_a_reconnect_asks_again(connect: Any, outlet: OneBotOutlet) -> None:
    first = await connect()
    self_id = str(first.self_id)
    assert await outlet.capabilities(self_id) == {Capability.POKE, Capability.REACT}
    await disconnect(first)
    second = await connect(self_id=first.self_id, app_name="LLOneBot")
    assert await outlet.capabilities(self_id) == {Capability.POKE}
    assert len(second.calls_to("get_version_info")) == 1


async def test_a_stalled_probe_never_holds_a_turn_and_is_asked_again_later(
    connect: Any, recorder: Recorder, warnings: list[str]
) -> None:
    napcat = await connect()
    self_id = str(napcat.self_id)
    napcat.unanswered.add("get_version_info")  # NapCat stalls: the call is never answered
    clock = [0.0]
    outlet = OneBotOutlet(recorder, probe_timeout_s=1.5, monotonic=lambda: clock[0])
    # The turn goes on without capabilities while the probe is still waiting for NapCat.
    assert await outlet.capabilities(self_id) == frozenset()
    probe = outlet.probe(self_id, nonebot.get_bots()[self_id])
    assert probe.task is not None and probe.capabilities is None
    await wait_for(lambda: probe.task is None, what="the probe to give up")
    assert any("get_version_info failed" in line for line in warnings)
    # Unknown is not "none forever": once NapCat answers, the next due probe learns them.
    napcat.unanswered.discard("get_version_info")
    assert await outlet.capabilities(self_id) == frozenset()  # not due yet: not asked
    assert len(napcat.calls_to("get_version_info")) == 1
    clock[0] += PROBE_RETRY_S
    assert await outlet.capabilities(self_id) == {Capability.POKE, Capability.REACT}
    assert len(napcat.calls_to("get_version_info")) == 2


async def test_the_platform_history_says_whether_a_lost_send_went_out(
    connect: Any, outlet: OneBotOutlet, recorder: Recorder
) -> None:
    napcat = await connect()
    since = datetime.now(UTC) - timedelta(seconds=30)
    mine = {"user_id": napcat.self_id, "time": int(since.timestamp()) + 10, "message_id": 77}
    napcat.responders["get_friend_msg_history"] = lambda params: {
        "messages": [
            {**mine, "message": [{"type": "text", "data": {"text": "别的"}}]},
            {**mine, "message_id": 78, "message": [{"type": "text", "data": {"text": "在的"}}]},
        ]
    }
    found = await outlet.find_sent(private(napcat), "在的", since)
    assert (found.answered, found.platform_message_id) == (True, "78")
    assert [r.platform_message_id for r in recorder.items] == ["78"]  # now a timeline fact
    absent = await outlet.find_sent(private(napcat), "没说过", since)
    assert (absent.answered, absent.platform_message_id) == (True, None)
    napcat.failing.add("get_group_msg_history")
    unreadable = await outlet.find_sent(group(napcat), "在的", since)
    assert not unreadable.answered
    [params] = napcat.calls_to("get_group_msg_history")
    assert params["group_id"] == "700"


async def test_a_failing_version_call_means_no_capabilities(
    connect: Any, outlet: OneBotOutlet, warnings: list[str]
) -> None:
    napcat = await connect()
    napcat.failing.add("get_version_info")
    assert await outlet.capabilities(str(napcat.self_id)) == frozenset()
    assert any("get_version_info failed" in line for line in warnings)


# Not connected ------------------------------------------------------------------------------


async def test_a_stream_of_a_bot_not_connected_does_nothing(
    outlet: OneBotOutlet, recorder: Recorder, warnings: list[str]
) -> None:
    stream = StreamKey("qq", "59999", StreamKind.GROUP, "700")
    assert await outlet.send(stream, HELLO) is None
    assert await outlet.poke(stream, "42") is False
    assert await outlet.react(stream, "123", "赞") is False
    assert await outlet.capabilities("59999") == frozenset()
    assert recorder.items == []
    assert sum("group:700: bot 59999 is not connected" in line for line in warnings) == 3


# The vocabulary -----------------------------------------------------------------------------


def test_reaction_ids() -> None:
    assert reaction_id("赞") == "76"
    assert reaction_id(" ok ") == "124"
    assert reaction_id("Doge") == "179"
    assert reaction_id("666") is None
    assert reaction_id("") is None
    assert all(face_id.isdigit() for face_id in REACTIONS.values())
    assert len(set(REACTIONS.values())) == len(REACTIONS)
