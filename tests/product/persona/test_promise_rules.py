"""Promises as pure rules: what a `[承诺:…]` marker's value promises and when (in the groups'
local time, Asia/Shanghai), and whether an owner asked for it."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from pallas.core.inbound import StreamKey
from pallas.product.conversation.gate.facts import MessageFacts
from pallas.product.conversation.gate.gate import Disposition, Outcome, Reason
from pallas.product.conversation.ingress import StoredMessage
from pallas.product.conversation.turns.buffers import Batch
from pallas.product.conversation.turns.runner import build_turn
from pallas.product.conversation.turns.turn import Admitted, Occasion, Turn
from pallas.product.persona.promises import PromiseDraft, owner_asking, read_promise
from pallas.product.persona.routine import SHANGHAI
from tests.support.inbound import BOT_ID, message, private

OWNER = "7"
OWNERS = frozenset({OWNER})
NOON = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)  # 12:00 in Shanghai


def local(day: int, hour: int, minute: int = 0) -> datetime:
    """2026-12-`day` at that time in Shanghai."""
    return datetime(2026, 12, day, hour, minute, tzinfo=SHANGHAI)


# --- read_promise ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "draft"),
    [
        ("帮主人记着买牛奶", PromiseDraft("帮主人记着买牛奶", None)),
        ("  下次给主人讲个笑话 ", PromiseDraft("下次给主人讲个笑话", None)),
        ("明天08:00 提醒开会", PromiseDraft("提醒开会", local(3, 8))),
        ("明天 08:00 提醒开会", PromiseDraft("提醒开会", local(3, 8))),
        ("后天9点 交报告", PromiseDraft("交报告", local(4, 9))),
        ("明天8：30 出门", PromiseDraft("出门", local(3, 8, 30))),  # a full-width colon
        ("8点 叫主人起床", PromiseDraft("叫主人起床", local(3, 8))),  # 08:00 is past at noon
        ("6点半 跑步", PromiseDraft("跑步", local(3, 6, 30))),
        ("13点05分 开会", PromiseDraft("开会", local(2, 13, 5))),
        ("晚上9点 提醒吃药", PromiseDraft("提醒吃药", local(2, 21))),
        ("下午3点 喝下午茶", PromiseDraft("喝下午茶", local(2, 15))),
        ("晚上21:30 追剧", PromiseDraft("追剧", local(2, 21, 30))),  # already past noon: kept
        ("晚上12点 睡觉", PromiseDraft("睡觉", local(3, 0))),  # midnight, not noon
        ("中午12点 吃饭", PromiseDraft("吃饭", local(3, 12))),  # noon, past: tomorrow
        ("20分钟后提醒喝水", PromiseDraft("提醒喝水", NOON + timedelta(minutes=20))),
        ("2小时后 提醒休息", PromiseDraft("提醒休息", NOON + timedelta(hours=2))),
        ("30秒后 说一声", PromiseDraft("说一声", NOON + timedelta(seconds=30))),
        ("10秒钟后 说一声", PromiseDraft("说一声", NOON + timedelta(seconds=10))),
        ("25:00 x", PromiseDraft("25:00 x", None)),  # no such time: kept as untimed text
        ("8:75 x", PromiseDraft("8:75 x", None)),
        ("明天08:00", PromiseDraft("明天08:00", None)),  # a time with nothing to do
        ("20分钟后", PromiseDraft("20分钟后", None)),
        ("3个苹果留给主人", PromiseDraft("3个苹果留给主人", None)),  # a number, not a time
    ],
)
def test_a_marker_value_becomes_what_is_promised_and_when(value: str, draft: PromiseDraft) -> None:
    assert read_promise(value, NOON) == draft


@pytest.mark.parametrize("value", ["", "   ", "\n"])
def test_nothing_said_is_no_promise(value: str) -> None:
    assert read_promise(value, NOON) is None


@pytest.mark.parametrize(
    ("now", "due"),
    [
        (local(2, 6), local(2, 8)),  # before 08:00: this morning
        (local(2, 7, 59), local(2, 8)),
        (local(2, 8), local(3, 8)),  # at 08:00 that time has come: tomorrow
        (local(2, 9), local(3, 8)),  # after: tomorrow morning
        (local(2, 23, 30), local(3, 8)),
    ],
)
def test_a_bare_time_already_past_today_means_tomorrow(now: datetime, due: datetime) -> None:
    draft = read_promise("8点 叫主人起床", now.astimezone(UTC))
    assert draft == PromiseDraft("叫主人起床", due)


def test_a_bare_time_is_read_in_shanghai_not_in_the_clock_s_zone() -> None:
    # 01:00 UTC is 09:00 in Shanghai: 08:00 there has passed, though it is only 01:00 in UTC.
    now = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
    draft = read_promise("8点 叫主人起床", now)
    assert draft is not None
    assert draft.due_at == datetime(2026, 12, 3, 0, 0, tzinfo=UTC)  # 08:00 tomorrow there


@pytest.mark.parametrize(
    "now",
    [
        NOON,
        NOON.astimezone(SHANGHAI),
        NOON.astimezone(ZoneInfo("America/New_York")),
        NOON.astimezone(timezone(timedelta(hours=5, minutes=30))),
    ],
    ids=["utc", "shanghai", "new_york", "fixed_offset"],
)
@pytest.mark.parametrize("value", ["明天08:00 提醒开会", "8点 叫主人起床", "20分钟后提醒喝水"])
def test_the_due_time_is_aware_and_in_the_zone_of_now(now: datetime, value: str) -> None:
    draft = read_promise(value, now)
    assert draft is not None and draft.due_at is not None
    assert draft.due_at.tzinfo is not None
    assert draft.due_at.tzinfo == now.tzinfo
    assert draft.due_at.utcoffset() == now.utcoffset()


def test_the_same_words_at_the_same_instant_give_the_same_moment_in_any_zone() -> None:
    in_utc = read_promise("明天08:00 提醒开会", NOON)
    in_shanghai = read_promise("明天08:00 提醒开会", NOON.astimezone(SHANGHAI))
    assert in_utc is not None and in_shanghai is not None
    assert in_utc.due_at == in_shanghai.due_at == datetime(2026, 12, 3, 0, 0, tzinfo=UTC)


# --- owner_asking ----------------------------------------------------------------------------

_ids = itertools.count(100)


def stored(
    user_id: str, *, from_bot: bool = False, stream: StreamKey | None = None
) -> StoredMessage:
    msg = message("记一下", stream=stream or private(user_id), user_id=user_id, from_bot=from_bot)
    return StoredMessage(next(_ids), 1, int(user_id), msg)


def turn_of(*messages: StoredMessage) -> Turn:
    disposition = Disposition(Outcome.FORCE, Reason.DIRECT_CONVERSATION)
    items = tuple(Admitted(m, MessageFacts(), disposition) for m in messages)
    return build_turn(1, Batch(1, items, may_wait=False, private=True), disposition)


def test_an_owner_s_batch_names_that_owner() -> None:
    assert owner_asking(turn_of(stored(OWNER), stored(OWNER)), OWNERS) == int(OWNER)


def test_anyone_else_s_batch_names_nobody() -> None:
    assert owner_asking(turn_of(stored("42")), OWNERS) is None
    assert owner_asking(turn_of(stored(OWNER)), frozenset()) is None  # no owners configured


def test_the_owner_is_found_anywhere_in_the_batch() -> None:
    stream = private(OWNER)
    batch = turn_of(stored("42", stream=stream), stored(OWNER, stream=stream))
    assert owner_asking(batch, OWNERS) == int(OWNER)


def test_the_bot_s_own_lines_never_ask_even_under_an_owner_s_id() -> None:
    # An owner's account id that is also the bot's (a test set-up, a misconfiguration).
    mine = stored(BOT_ID, from_bot=True, stream=private(OWNER))
    assert owner_asking(turn_of(mine), frozenset({BOT_ID})) is None


def test_a_turn_the_bot_started_itself_has_no_one_asking() -> None:
    base = turn_of(stored(OWNER))
    proactive = Turn(
        turn_id=2,
        stream_id=base.stream_id,
        stream=base.stream,
        messages=(),
        text="",
        facts=MessageFacts(),
        disposition=Disposition(Outcome.DELIBERATE, Reason.PROACTIVE),
        trigger=base.trigger,
        timeline_size=base.timeline_size,
        may_wait=False,
        watermark=base.watermark,
        occasion=Occasion("promise_due", "时间到了"),
    )
    assert owner_asking(proactive, OWNERS) is None
