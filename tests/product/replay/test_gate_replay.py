"""The gate run again over a recorded chat (pure): proposed ambient settings start their own
ambient turns, pokes are counted under the replayed window, the tallies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pallas.console.replay import parse_changes, window_of
from pallas.core.inbound import StreamKind
from pallas.product.conversation.gate.facts import MessageFacts
from pallas.product.conversation.gate.policy import GatePolicy
from pallas.product.replay.gate_replay import (
    Line,
    Recorded,
    RecordedChat,
    recorded_tally,
    replay,
    replayed_tally,
)
from pallas.product.replay.run import ReplayError, checked_proposal

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
PLAIN = MessageFacts()


def chatter(n: int, facts: MessageFacts = PLAIN, seconds: int = 60) -> Line:
    recorded = Recorded(facts, "drop", "attention_filtered", frozenset(), False, True)
    return Line(n, str(n), 100 + n % 3, T0 + timedelta(seconds=seconds * n), recorded=recorded)


def test_a_proposed_ambient_setting_starts_its_own_turns_and_keeps_its_cooldown() -> None:
    chat = RecordedChat(1, StreamKind.GROUP, tuple(chatter(n) for n in range(1, 31)), ())
    eager = GatePolicy(ambient_probability=1, ambient_cooldown_s=600, ambient_hourly_budget=10)
    decided = replay(chat, lambda _at: eager, "seed", recorded_ambient=False)
    ambient = [r.message_id for r in decided if r.replayed.reason.value == "ambient"]
    assert ambient == [1, 11, 21]  # one a cooldown of ten minutes, lines a minute apart
    assert recorded_tally(decided).own == 0 and replayed_tally(decided).own == 3
    # The recorded ambient turns (none that day) decide for the settings of the day.
    kept = replay(chat, lambda _at: eager, "seed", recorded_ambient=True)
    assert len([r for r in kept if r.replayed.reason.value == "ambient"]) == 30


def test_pokes_are_counted_under_the_replayed_window() -> None:
    poke = MessageFacts(is_poke=True, poked_me=True)
    lines = tuple(chatter(n, poke, seconds=10) for n in range(1, 6))
    chat = RecordedChat(1, StreamKind.GROUP, lines, ())
    tight = GatePolicy(poke_limit=2, poke_window_s=300)
    reasons = [r.replayed.reason.value for r in replay(chat, lambda _at: tight, "s",
                                                       recorded_ambient=True)]  # fmt: skip
    assert reasons[:2] == ["attention", "attention"] and reasons[2:] == ["poke_flood"] * 3
    tally = replayed_tally(replay(chat, lambda _at: tight, "s", recorded_ambient=True))
    assert (tally.gated, tally.called, tally.dropped) == (5, 2, {"poke_flood": 3})


@pytest.mark.parametrize(
    ("day", "since", "until", "said"),
    [
        ("x", None, None, "日期看不懂"),
        ("9999-12-31", None, None, "2000 年到 2100 年"),
        (None, "2026-12-01T00:00+08:00", None, "--since 和 --until"),
        (None, "2026-12-01T00:00", "2026-12-02T00:00+08:00", "带时区"),
        (None, "2026-12-02T00:00+08:00", "2026-12-01T00:00+08:00", "结束要晚于开始"),
        (None, "2026-12-01T00:00+08:00", "2026-12-20T00:00+08:00", "最多重放 7 天"),
    ],
)
def test_a_window_that_cannot_be_replayed_says_why(
    day: str | None, since: str | None, until: str | None, said: str
) -> None:
    with pytest.raises(ReplayError, match=said):
        window_of(day, since, until)


def test_proposed_settings_are_read_as_json_when_they_parse() -> None:
    assert parse_changes(["ambient_probability=0.1", 'quiet_hours=["00:30-08:00"]', "x=文字"]) == {
        "ambient_probability": 0.1,
        "quiet_hours": ["00:30-08:00"],
        "x": "文字",
    }
    with pytest.raises(ReplayError, match="名字=值"):
        parse_changes(["ambient_probability"])
    with pytest.raises(ReplayError, match="没有这样的设置"):
        checked_proposal(GatePolicy(), {"x": 1})
