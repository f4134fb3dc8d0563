"""The seams between the stream facts and the gate, through the real path.

A `StreamActivity` built from `Sighting`s is read by `gate_request` (facts.py), then judged
by `decide_disposition` (gate.py). Each test pins one rule at the edge where a small bug
would slip through: windows exactly at their boundary and just past it, rule order, and the
facts a rule depends on.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pallas.core.inbound import StreamKind
from pallas.product.llm.kernel.activity import Sighting, StreamActivity
from pallas.product.llm.kernel.facts import Asker, MessageFacts, gate_request
from pallas.product.llm.kernel.gate import (
    Disposition,
    Outcome,
    Reason,
    Signal,
    decide_disposition,
)
from pallas.product.llm.kernel.policy import GatePolicy

NOW = datetime(2026, 1, 1, 4, 0, tzinfo=UTC)  # 12:00 in Asia/Shanghai
MIDNIGHT = datetime(2026, 1, 1, 16, 0, tzinfo=UTC)  # 00:00 in Asia/Shanghai
BOT = 0
ALICE = 1
BOB = 2
CURRENT = 100  # the id of the message being decided (always the newest)
QUIET = GatePolicy(ambient_probability=0.0)
PLAIN = MessageFacts()


def _said(
    message_id: int, person_id: int, age_s: float, now: datetime = NOW, **flags: bool
) -> Sighting:
    return Sighting(
        message_id=message_id,
        platform_message_id=f"p{message_id}",
        person_id=person_id,
        at=now - timedelta(seconds=age_s),
        **flags,
    )


def _bot_said(message_id: int, age_s: float, now: datetime = NOW) -> Sighting:
    return _said(message_id, BOT, age_s, now, from_bot=True)


def _decide(
    history: list[Sighting],
    facts: MessageFacts = PLAIN,
    policy: GatePolicy = QUIET,
    now: datetime = NOW,
    person_id: int = ALICE,
    roll: float = 1.0,
) -> Disposition:
    """Decide on the current message of `person_id`, sent at `now` after `history`."""
    current = _said(
        CURRENT,
        person_id,
        0,
        now,
        mentioned_me=facts.mentioned_me,
        poked_me=facts.poked_me,
        replied_to_me=facts.replied_to_me,
    )
    activity = StreamActivity([*history, current])  # the activity already holds this message
    asker = Asker(kind=StreamKind.GROUP, person_id=person_id, message_id=CURRENT, ambient_roll=roll)
    return decide_disposition(gate_request(asker, facts, activity, policy, now), policy)


# --- follow-up: the same person continuing shortly after an @ -----------------------------


def test_plain_message_shortly_after_an_at_is_a_follow_up() -> None:
    decided = _decide([_said(1, ALICE, 30, mentioned_me=True)])
    assert (decided.outcome, decided.reason) == (Outcome.DELIBERATE, Reason.ATTENTION)
    assert decided.signals == {Signal.FOLLOW_UP}


def test_follow_up_window_closes_after_its_knob() -> None:
    decided = _decide([_said(1, ALICE, 61, mentioned_me=True)])
    assert decided.reason is Reason.ATTENTION_FILTERED
    assert Signal.FOLLOW_UP not in decided.signals


# --- ongoing exchange: only once the bot answered the person's direct call ----------------


def test_ongoing_exchange_needs_the_bot_to_have_answered_after_the_call() -> None:
    # Alice replied to the bot 100 s ago; the bot last spoke 200 s ago, before her call.
    history = [_bot_said(1, 200), _said(2, ALICE, 100, replied_to_me=True)]
    decided = _decide(history)
    assert Signal.ONGOING_EXCHANGE not in decided.signals
    assert (decided.outcome, decided.reason) == (Outcome.DROP, Reason.ATTENTION_FILTERED)


def test_ongoing_exchange_when_the_bot_answered_the_call() -> None:
    # Alice replied to the bot 100 s ago and the bot answered 95 s ago (past the natural window).
    history = [_said(1, ALICE, 100, replied_to_me=True), _bot_said(2, 95)]
    decided = _decide(history)
    assert (decided.outcome, decided.reason) == (Outcome.DELIBERATE, Reason.ATTENTION)
    assert decided.signals == {Signal.ONGOING_EXCHANGE}


# --- frequency cap: only the bot's replies inside reply_window_s count -------------------

# Every window distinct, and one (hot, off by default) longer than the reply window, so the
# scan reaches bot replies older than the reply window.
CAP_POLICY = GatePolicy(
    ambient_probability=0.0,
    max_replies_in_window=2,
    reply_window_s=300,
    poke_window_s=200,
    natural_window_s=90,
    follow_up_window_s=60,
    ongoing_exchange_s=120,
    hot_window_s=900,
)
QUESTION = MessageFacts(public_question=True)  # an attention signal the cap may silence


@pytest.mark.parametrize(
    ("older_reply_age", "capped"),
    [(300, True), (301, False)],
    ids=["at the window edge counts", "just past the window does not count"],
)
def test_frequency_cap_counts_replies_inside_the_reply_window(
    older_reply_age: float, capped: bool
) -> None:
    history = [_bot_said(1, older_reply_age), _bot_said(2, 100)]
    decided = _decide(history, QUESTION, CAP_POLICY)
    assert decided.signals == {Signal.PUBLIC_QUESTION}
    if capped:
        assert (decided.outcome, decided.reason) == (Outcome.DROP, Reason.FREQUENCY_CAP)
    else:
        assert (decided.outcome, decided.reason) == (Outcome.DELIBERATE, Reason.ATTENTION)


def test_frequency_cap_ignores_a_lone_reply_older_than_the_window() -> None:
    policy = QUIET.with_overrides({"max_replies_in_window": 1})
    decided = _decide([_bot_said(1, 601)], QUESTION, policy)
    assert (decided.outcome, decided.reason) == (Outcome.DELIBERATE, Reason.ATTENTION)


# --- natural window: shortly after the bot spoke, boundary included ----------------------


@pytest.mark.parametrize(
    ("policy", "age", "inside"),
    [
        (QUIET, 90, True),
        (QUIET, 90.5, False),
        (QUIET.with_overrides({"natural_window_s": 30}), 30, True),
        (QUIET.with_overrides({"natural_window_s": 30}), 30.5, False),
    ],
    ids=["90 s exactly", "just past 90 s", "30 s knob exactly", "just past the 30 s knob"],
)
def test_natural_window_boundary(policy: GatePolicy, age: float, inside: bool) -> None:
    decided = _decide([_bot_said(1, age)], policy=policy)
    if inside:
        assert (decided.outcome, decided.reason) == (Outcome.DELIBERATE, Reason.ATTENTION)
        assert decided.signals == {Signal.NATURAL_WINDOW}
    else:
        assert (decided.outcome, decided.reason) == (Outcome.DROP, Reason.ATTENTION_FILTERED)
        assert not decided.signals


# --- ambient lottery: never for a poke between two members --------------------------------

SURE_LOTTERY = GatePolicy(ambient_probability=1.0)


def test_ambient_lottery_wins_for_a_plain_message() -> None:
    decided = _decide([_said(1, BOB, 30)], policy=SURE_LOTTERY, roll=0.0)
    assert (decided.outcome, decided.reason) == (Outcome.DELIBERATE, Reason.AMBIENT)


def test_ambient_lottery_never_joins_a_poke_between_members() -> None:
    poke = MessageFacts(is_poke=True, poked_me=False)  # Alice poked Bob, not the bot
    decided = _decide([_said(1, BOB, 30)], poke, SURE_LOTTERY, roll=0.0)
    assert (decided.outcome, decided.reason) == (Outcome.DROP, Reason.ATTENTION_FILTERED)


# --- rule order: quiet hours before the frequency cap -------------------------------------

SLEEPY_CAP = GatePolicy(
    ambient_probability=0.0, max_replies_in_window=2, quiet_hours=("23:00-07:00",)
)


def test_quiet_hours_drop_before_the_frequency_cap() -> None:
    history = [_bot_said(1, 200, MIDNIGHT), _bot_said(2, 150, MIDNIGHT)]
    decided = _decide(history, QUESTION, SLEEPY_CAP, MIDNIGHT)
    assert (decided.outcome, decided.reason) == (Outcome.DROP, Reason.ASLEEP)


def test_same_stream_awake_is_over_the_cap() -> None:
    history = [_bot_said(1, 200), _bot_said(2, 150)]
    decided = _decide(history, QUESTION, SLEEPY_CAP, NOW)
    assert (decided.outcome, decided.reason) == (Outcome.DROP, Reason.FREQUENCY_CAP)
