"""Typed outbox payloads: checked when queued, sent segment by segment, queued once per key."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.core.actions import ChatAction, Origin, Poke, Reaction, action_of
from pallas.core.inbound import MediaRef, Segment, SegmentKind, StreamKey
from pallas.platform.onebot.outbound import (
    UnsendableSegmentError,
    inline_assets,
    to_onebot_message,
)
from pallas.product.conversation.delivery.contract import OutgoingMessage
from pallas.product.conversation.delivery.dispatcher import OutboxDelivery, OutboxDispatcher
from pallas.product.conversation.delivery.payload import (
    PayloadError,
    asset_checker,
    check_action,
    message_payload,
    segments_of,
)
from pallas.store.ledger import LedgerWriter
from pallas.store.models import OutboxItem
from pallas.store.outbox import OutboxStore
from pallas.store.timeline import TimelineWriter
from tests.product.conversation.delivery.test_outbox import POLICY, T0, Kit, Outlet, drained

TEXT = Segment(SegmentKind.TEXT, text="看这个")


def media(kind: SegmentKind, *, file: str = "", url: str = "") -> Segment:
    return Segment(kind, text="[媒体]", media=MediaRef(file=file, url=url))


def only(*present: str):
    return lambda relative: relative in present


SENDABLE: list[tuple[str, Sequence[Segment]]] = [
    ("text", [TEXT]),
    ("an @ and text", [Segment(SegmentKind.AT, text="@甲", target="123"), TEXT]),
    ("@all", [Segment(SegmentKind.AT_ALL, text="@全体成员")]),
    ("a quote", [Segment(SegmentKind.REPLY, target="-42"), TEXT]),
    ("a QQ face", [Segment(SegmentKind.FACE, text="[微笑]", target="14")]),
    ("an image asset", [media(SegmentKind.IMAGE, file="asset:stickers/ok.png")]),
    ("an image URL", [media(SegmentKind.IMAGE, url="https://example.invalid/a.png")]),
    ("voice as base64", [media(SegmentKind.RECORD, url="base64://AAAA")]),
    ("a video URL", [media(SegmentKind.VIDEO, url="http://example.invalid/v.mp4")]),
    (
        "a shop sticker",
        [Segment(SegmentKind.MARKET_FACE, text="[好的]", detail=(("key", "k1"),))],
    ),
]

REFUSED: list[tuple[str, Sequence[Segment], str]] = [
    ("nothing", [], "an empty message cannot be sent"),
    ("a file", [Segment(SegmentKind.FILE, text="[文件]")], "unknown segment type 'file'"),
    ("a card", [Segment(SegmentKind.CARD, text="[卡片]")], "unknown segment type 'card'"),
    ("empty text", [Segment(SegmentKind.TEXT, text="")], "segment 0 (text): empty text"),
    ("an @ of a name", [Segment(SegmentKind.AT, target="甲")], "'甲' is not an id"),
    ("a quote of nothing", [TEXT, Segment(SegmentKind.REPLY)], "segment 1 (reply)"),
    ("a face without id", [Segment(SegmentKind.FACE, text="[微笑]")], "None is not an id"),
    ("an image of nothing", [media(SegmentKind.IMAGE)], "needs an asset reference or a URL"),
    (
        "a platform file name",
        [media(SegmentKind.IMAGE, file="abc.image")],
        "'abc.image' is not an asset reference",
    ),
    ("a missing asset", [media(SegmentKind.IMAGE, file="asset:gone.png")], "missing asset"),
    (
        "an asset outside the folder",
        [media(SegmentKind.RECORD, file="asset:../secrets.env")],
        "is not an asset reference",
    ),
    ("an absolute asset", [media(SegmentKind.VIDEO, file="asset:/etc/passwd")], "not an asset"),
    ("a local URL", [media(SegmentKind.IMAGE, url="file:///etc/passwd")], "unsupported URL"),
    ("a sticker without key", [Segment(SegmentKind.MARKET_FACE, text="[好的]")], "its key"),
]


@pytest.mark.parametrize(("case", "segments"), SENDABLE, ids=[c for c, _ in SENDABLE])
def test_sendable_segments_are_stored_whole_with_their_text(
    case: str, segments: Sequence[Segment]
) -> None:
    payload = message_payload(segments, only("stickers/ok.png"), pause_s=0.5, quote="9")
    assert segments_of(payload) == tuple(segments)
    assert payload["text"] == "".join(s.text for s in segments if s.kind is not SegmentKind.REPLY)
    assert (payload["pause_s"], payload["quote"]) == (0.5, "9")


@pytest.mark.parametrize(("case", "segments", "why"), REFUSED, ids=[c for c, _, _ in REFUSED])
def test_unsendable_messages_are_refused_with_the_reason(
    case: str, segments: Sequence[Segment], why: str
) -> None:
    with pytest.raises(PayloadError) as refused:
        message_payload(segments, only("stickers/ok.png"))
    assert why in str(refused.value)


def test_rows_from_before_typed_payloads_are_read_as_text() -> None:
    assert segments_of({"text": "旧的一行", "pause_s": 0}) == (
        Segment(SegmentKind.TEXT, text="旧的一行"),
    )


@pytest.mark.parametrize(
    ("action", "why"),
    [
        (Poke("abc"), "a poke needs a user id"),
        (Reaction("1", "不存在"), "unknown reaction"),
        (Reaction("x", "赞"), "a reaction needs a message id"),
    ],
)
def test_bad_actions_are_refused(action: ChatAction, why: str) -> None:
    with pytest.raises(PayloadError, match=why):
        check_action(action)
    check_action(Poke("5"))
    check_action(Reaction("-5", "ok"))


def test_stored_actions_read_back_typed() -> None:
    for action in (Poke("5"), Reaction("-5", "赞")):
        assert action_of(action.kind, action.to_payload()) == action
    with pytest.raises(ValueError, match="not a poke or a reaction"):
        action_of("shout", {})


def test_the_assets_folder_is_asked_for_real_files(tmp_path: Path) -> None:
    (tmp_path / "stickers").mkdir()
    (tmp_path / "stickers" / "ok.png").write_bytes(b"png")
    exists = asset_checker(tmp_path)
    assert exists("stickers/ok.png")
    assert not exists("stickers/no.png") and not exists("stickers")


def test_assets_go_out_as_their_bytes_and_urls_as_they_are(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(b"\x89PNG")
    url = media(SegmentKind.IMAGE, url="https://example.invalid/b.png")
    sent = inline_assets([TEXT, media(SegmentKind.IMAGE, file="asset:a.png"), url], tmp_path)
    assert sent[0] == TEXT and sent[2] == url
    assert sent[1].media is not None
    assert sent[1].media.url == "base64://" + base64.b64encode(b"\x89PNG").decode()
    message = to_onebot_message([*sent, media(SegmentKind.VIDEO, url="https://e.invalid/v")])
    assert [seg.type for seg in message] == ["text", "image", "image", "video"]
    with pytest.raises(UnsendableSegmentError, match="cannot be read"):
        inline_assets([media(SegmentKind.IMAGE, file="asset:gone.png")], tmp_path)
    with pytest.raises(UnsendableSegmentError, match="no assets folder"):
        inline_assets([media(SegmentKind.IMAGE, file="asset:a.png")], None)


@dataclass
class SegmentOutlet(Outlet):
    """Keeps every segment it was asked to send."""

    messages: list[tuple[Segment, ...]] = field(default_factory=list)

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None:
        self.messages.append(tuple(segments))
        return await super().send(stream, segments, quote)


@pytest.fixture
async def typed(engine: AsyncEngine) -> AsyncIterator[tuple[Kit, OutboxDelivery]]:
    ledger, timeline = LedgerWriter(engine), TimelineWriter(engine)
    ledger.start()
    timeline.start()
    kit = Kit(engine, OutboxStore(engine), ledger, timeline, SegmentOutlet(), lambda: T0)
    kit.dispatcher = OutboxDispatcher(kit.store, kit.outlet, ledger, POLICY, kit.clock)
    yield kit, OutboxDelivery(kit.store, kit.dispatcher, kit.clock, only("ok.png"))
    await kit.dispatcher.stop()
    await ledger.close()
    await timeline.close()


async def rows(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(OutboxItem))).scalar())


async def test_a_typed_message_goes_out_with_its_segments(
    typed: tuple[Kit, OutboxDelivery],
) -> None:
    kit, delivery = typed
    sid = await kit.stream_id("g1")
    segments = (
        Segment(SegmentKind.AT, text="@甲", target="123"),
        TEXT,
        media(SegmentKind.IMAGE, file="asset:ok.png"),
    )
    [row] = await delivery.send(OutgoingMessage(5, sid, segments, origin=Origin.RESPONDER))
    assert kit.dispatcher is not None
    kit.dispatcher.start()
    await drained(kit)
    assert isinstance(kit.outlet, SegmentOutlet) and kit.outlet.messages == [segments]
    async with kit.engine.connect() as conn:
        query = select(
            OutboxItem.turn_id,
            OutboxItem.status,
            OutboxItem.direct,
            OutboxItem.payload,
            OutboxItem.origin,
        )
        stored = (await conn.execute(query.where(OutboxItem.id == row))).one()
    assert (stored.turn_id, stored.status, stored.direct) == (5, "sent", True)
    assert stored.origin == "responder"
    assert stored.payload["text"] == "@甲看这个[媒体]"


async def test_a_bad_payload_writes_nothing(typed: tuple[Kit, OutboxDelivery]) -> None:
    kit, delivery = typed
    sid = await kit.stream_id("g1")
    gone = media(SegmentKind.IMAGE, file="asset:gone.png")
    with pytest.raises(PayloadError, match=r"missing asset 'gone\.png'"):
        await delivery.send(OutgoingMessage(5, sid, (TEXT, gone), origin=Origin.COMMAND))
    with pytest.raises(PayloadError, match="a poke needs a user id"):
        await delivery.act(5, sid, Poke("everyone"), origin=Origin.RESPONDER)
    with pytest.raises(PayloadError, match="unknown reaction"):
        await delivery.act(5, sid, Reaction("12", "shout"), origin=Origin.AGENT_REPLY)
    assert await rows(kit.engine) == 0


async def test_the_same_key_is_queued_once(typed: tuple[Kit, OutboxDelivery]) -> None:
    kit, delivery = typed
    sid = await kit.stream_id("g1")
    said = Origin.RESPONDER
    first = await delivery.send(OutgoingMessage(5, sid, (TEXT,), key="repeat:77", origin=said))
    again = await delivery.send(OutgoingMessage(6, sid, (TEXT,), key="repeat:77", origin=said))
    other = await delivery.send(OutgoingMessage(7, sid, (TEXT,), key="repeat:78", origin=said))
    poke = await delivery.act(8, sid, Poke("9"), origin=said, key="poke_back:1")
    poke_again = await delivery.act(9, sid, Poke("9"), origin=said, key="poke_back:1")
    assert first == again and other != first and poke == poke_again
    assert await rows(kit.engine) == 3
    assert await kit.store.open_pokes(sid) == [("9", T0)]
