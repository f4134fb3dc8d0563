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
from pallas.product.conversation.gate.activity import Sighting, StreamActivity
from pallas.product.conversation.gate.facts import Asker, MessageFacts, gate_request
from pallas.product.conversation.gate.gate import (
    Disposition,
    Outcome,
    Reason,
    Signal,
    decide_disposition,
)
from pallas.product.conversation.gate.policy import GatePolicy

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
    *,
    kind: StreamKind = StreamKind.GROUP,
    queued: int = 0,
    declined: bool = False,
    ambient_ages: tuple[float, ...] = (),
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
    activity = StreamActivity(  # the activity already holds this message
        [*history, current],
        ambient_turns=[now - timedelta(seconds=age) for age in ambient_ages],
        follow_up_declined=declined,
    )
    asker = Asker(kind=kind, person_id=person_id, message_id=CURRENT, ambient_roll=roll)
    request = gate_request(asker, facts, activity, policy, now, queued_replies=queued)
    return decide_disposition(request, policy)


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


# --- which of the bot's messages and which calls the facts are read from ------------------


def test_natural_window_runs_from_the_bots_newest_message() -> None:
    decided = _decide([_bot_said(1, 200), _bot_said(2, 10)])
    assert decided.signals == {Signal.NATURAL_WINDOW}


def test_natural_window_longer_than_every_scanned_window_still_finds_the_bot() -> None:
    # The scan stops past its horizon (600 s here) only once it has seen the bot speak.
    policy = QUIET.with_overrides({"natural_window_s": 1000})
    decided = _decide([_bot_said(1, 800), _said(2, BOB, 700)], policy=policy)
    assert decided.signals == {Signal.NATURAL_WINDOW}


def test_a_deliberate_silence_closes_the_natural_window_through_the_activity() -> None:
    decided = _decide([_bot_said(1, 10)], declined=True)
    assert (decided.outcome, decided.reason) == (Outcome.DROP, Reason.ATTENTION_FILTERED)


@pytest.mark.parametrize(
    ("ages", "queued", "capped"),
    [
        ((600, 100), 0, True),
        ((100,), 1, True),
        ((100,), 0, False),
        ((), 2, True),
        ((601, 100), 0, False),
    ],
    ids=[
        "a reply exactly at the widest window counts",
        "a queued bubble counts with a delivered one",
        "one delivered reply is under the cap",
        "queued bubbles alone reach the cap",
        "a reply past the window does not count",
    ],
)
def test_frequency_cap_counts_delivered_and_queued_replies(
    ages: tuple[float, ...], queued: int, capped: bool
) -> None:
    # Default windows: the reply window (600 s) is the widest, so it is the scan's horizon.
    policy = QUIET.with_overrides({"max_replies_in_window": 2})
    history = [_bot_said(i, age) for i, age in enumerate(ages, start=1)]
    decided = _decide(history, QUESTION, policy, queued=queued)
    assert decided.signals == {Signal.PUBLIC_QUESTION}
    assert (decided.reason is Reason.FREQUENCY_CAP) is capped
    assert decided.passes is not capped


def test_a_private_asker_is_a_direct_conversation() -> None:
    decided = _decide([], kind=StreamKind.PRIVATE)
    assert (decided.outcome, decided.reason) == (Outcome.FORCE, Reason.DIRECT_CONVERSATION)


def test_the_poke_count_of_the_facts_reaches_the_gate() -> None:
    flood = MessageFacts(is_poke=True, poked_me=True, pokes_in_window=4)
    assert _decide([], flood).reason is Reason.POKE_FLOOD


@pytest.mark.parametrize(
    ("history", "facts", "signals"),
    [
        (
            [_said(1, ALICE, 120, replied_to_me=True), _bot_said(2, 100)],
            PLAIN,
            {Signal.ONGOING_EXCHANGE},
        ),
        ([_said(1, ALICE, 120.5, replied_to_me=True), _bot_said(2, 100)], PLAIN, set()),
        (
            [_said(1, ALICE, 110, poked_me=True), _bot_said(2, 100)],
            PLAIN,
            {Signal.ONGOING_EXCHANGE},
        ),
        (
            [
                _said(1, ALICE, 110, replied_to_me=True),
                _bot_said(2, 100),
                _said(3, ALICE, 50, replied_to_me=True),
            ],
            PLAIN,
            set(),
        ),
        ([_said(1, BOB, 110, replied_to_me=True), _bot_said(2, 100)], PLAIN, set()),
        ([_said(1, ALICE, 110), _bot_said(2, 100)], PLAIN, set()),
        (
            [_said(1, ALICE, 110, replied_to_me=True), _bot_said(2, 100)],
            MessageFacts(replied_to_me=True),
            {Signal.REPLIED_TO_ME, Signal.ONGOING_EXCHANGE},
        ),
    ],
    ids=[
        "a call exactly at the exchange window",
        "a call just past the exchange window",
        "a poke is a call too",
        "her newest call is not answered yet",
        "another member's call is not her exchange",
        "a plain message is not a call",
        "the message being decided is not the call it continues",
    ],
)
def test_ongoing_exchange_follows_the_askers_newest_call(
    history: list[Sighting], facts: MessageFacts, signals: set[Signal]
) -> None:
    assert _decide(history, facts).signals == signals


@pytest.mark.parametrize(
    ("history", "facts", "signals"),
    [
        ([_said(1, ALICE, 60, mentioned_me=True)], PLAIN, {Signal.FOLLOW_UP}),
        (
            [_said(1, ALICE, 50), _said(2, ALICE, 30, mentioned_me=True)],
            PLAIN,
            {Signal.FOLLOW_UP},
        ),
        ([_said(1, BOB, 30, mentioned_me=True)], PLAIN, set()),
        ([_said(1, ALICE, 30, replied_to_me=True)], PLAIN, set()),
        (
            [_said(1, ALICE, 30, mentioned_me=True)],
            MessageFacts(mentioned_me=True),
            {Signal.MENTIONED},
        ),
    ],
    ids=[
        "an @ exactly at the follow-up window",
        "an older plain message does not hide the @",
        "someone else's @",
        "a reply is not an @",
        "a new @ is a mention, not a follow-up",
    ],
)
def test_follow_up_continues_the_askers_own_at(
    history: list[Sighting], facts: MessageFacts, signals: set[Signal]
) -> None:
    assert _decide(history, facts).signals == signals


HOT = QUIET.with_overrides(
    {
        "join_hot_conversations": True,
        "hot_window_s": 60,
        "hot_min_messages": 3,
        "hot_min_speakers": 2,
        "natural_window_s": 0,
    }
)


@pytest.mark.parametrize(
    ("history", "hot"),
    [
        ([_said(1, BOB, 60), _said(2, BOB, 30)], True),
        ([_said(1, BOB, 60.5), _said(2, BOB, 30)], False),
        ([_said(1, ALICE, 40), _said(2, ALICE, 30)], False),
        ([_bot_said(1, 40), _said(2, BOB, 30)], False),
        ([_bot_said(1, 40), _said(2, ALICE, 35), _said(3, BOB, 30)], True),
    ],
    ids=[
        "three messages, two speakers, the oldest at the window edge",
        "the oldest just past the window",
        "one speaker is not a conversation",
        "the bot's own message does not make it hot",
        "the bot's message is skipped, the members' count",
    ],
)
def test_hot_conversation_needs_enough_messages_and_speakers(
    history: list[Sighting], hot: bool
) -> None:
    assert _decide(history, policy=HOT).signals == ({Signal.HOT_CONVERSATION} if hot else set())


LOTTERY = GatePolicy(ambient_probability=0.5, ambient_cooldown_s=900, ambient_hourly_budget=1)


@pytest.mark.parametrize(
    ("ambient_ages", "roll", "wins"),
    [
        ((), 0.4, True),
        ((), 0.6, False),
        ((3600,), 0.0, False),
        ((3600.5,), 0.0, True),
        ((900,), 0.0, False),
    ],
    ids=[
        "a low roll wins",
        "a high roll loses",
        "an ambient turn exactly an hour ago still spends the budget",
        "one older than an hour does not",
        "the hour's budget of one is spent",
    ],
)
def test_ambient_chance_is_read_from_the_last_hour(
    ambient_ages: tuple[float, ...], roll: float, wins: bool
) -> None:
    decided = _decide([], policy=LOTTERY, roll=roll, ambient_ages=ambient_ages)
    assert (decided.reason is Reason.AMBIENT) is wins


@pytest.mark.parametrize(
    ("ambient_ages", "wins"),
    [((2000, 100), False), ((2000, 900), True)],
    ids=["cooldown from the newest turn", "newest turn past the cooldown"],
)
def test_ambient_cooldown_runs_from_the_newest_turn(
    ambient_ages: tuple[float, ...], wins: bool
) -> None:
    policy = LOTTERY.with_overrides({"ambient_hourly_budget": 5})
    decided = _decide([], policy=policy, roll=0.0, ambient_ages=ambient_ages)
    assert (decided.reason is Reason.AMBIENT) is wins


# --- the scan reaches back as far as the longest window -----------------------------------


@pytest.mark.parametrize(
    ("knob", "history", "signal"),
    [
        (
            {"ongoing_exchange_s": 1000},
            [_said(1, ALICE, 900, replied_to_me=True), _bot_said(2, 800)],
            Signal.ONGOING_EXCHANGE,
        ),
        (
            {"follow_up_window_s": 1000},
            [_said(1, ALICE, 900, mentioned_me=True), _bot_said(2, 800)],
            Signal.FOLLOW_UP,
        ),
        (
            {
                "hot_window_s": 1000,
                "join_hot_conversations": True,
                "hot_min_messages": 3,
                "hot_min_speakers": 2,
            },
            [_said(1, BOB, 900), _said(2, BOB, 800), _bot_said(3, 650)],
            Signal.HOT_CONVERSATION,
        ),
    ],
    ids=["ongoing exchange", "follow-up", "hot conversation"],
)
def test_a_window_longer_than_the_reply_window_is_read_to_its_end(
    knob: dict[str, object], history: list[Sighting], signal: Signal
) -> None:
    # The reply window (600 s) is shorter: the scan must not stop at the bot's last message.
    decided = _decide(history, policy=QUIET.with_overrides(knob))
    assert decided.signals == {signal}


@pytest.mark.parametrize(
    ("turn_age", "wins"),
    [(3600, False), (3600.5, True)],
    ids=["a turn exactly an hour ago counts", "a turn just over an hour ago does not"],
)
def test_a_batch_gated_later_counts_ambient_turns_of_the_hour_before_now(
    turn_age: float, wins: bool
) -> None:
    # A batch is gated again when it is taken, after its last message: the activity was last
    # pruned at that message, so the hour is counted back from now here.
    later = NOW + timedelta(seconds=30)
    activity = StreamActivity(
        [_said(CURRENT, ALICE, 0)], ambient_turns=[later - timedelta(seconds=turn_age)]
    )
    asker = Asker(StreamKind.GROUP, ALICE, CURRENT, ambient_roll=0.0)
    request = gate_request(asker, PLAIN, activity, LOTTERY, later)
    assert (decide_disposition(request, LOTTERY).reason is Reason.AMBIENT) is wins
