"""The gate run again over a recorded chat (pure): proposed ambient settings start their own
ambient turns, pokes are counted under the replayed window, the tallies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

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
