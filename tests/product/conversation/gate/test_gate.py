"""The gate's rules, one row per rule and per ordering subtlety."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from pallas.core.inbound import StreamKind
from pallas.product.conversation.gate.gate import (
    AmbientChance,
    Disposition,
    GateRequest,
    Outcome,
    Reason,
    Signal,
    decide_disposition,
)
from pallas.product.conversation.gate.policy import GatePolicy, effective_policy, is_quiet_time
from pallas.product.conversation.gate.signals import (
    looks_like_public_question,
    names_in,
    opens_with_name,
)
from pallas.product.conversation.gate.trigger import (
    SpeakTrigger,
    classify_speak_trigger,
    lottery_roll,
    timeline_size,
)

POLICY = GatePolicy(ambient_probability=0.0)
GROUP = GateRequest(kind=StreamKind.GROUP)
CAPPED = 8  # POLICY.max_replies_in_window

CASES: list[tuple[str, GateRequest, Outcome, Reason]] = [
    (
        "own message never loops",
        replace(GROUP, is_self_message=True, mentioned_me=True),
        Outcome.DROP,
        Reason.SELF_MESSAGE,
    ),
    (
        "own message even in private",
        GateRequest(kind=StreamKind.PRIVATE, is_self_message=True),
        Outcome.DROP,
        Reason.SELF_MESSAGE,
    ),
    (
        "third poke in the window wakes",
        replace(GROUP, is_poke=True, poked_me=True, pokes_in_window=3),
        Outcome.DELIBERATE,
        Reason.ATTENTION,
    ),
    (
        "fourth poke is a flood, even inside the natural window",
        replace(GROUP, is_poke=True, poked_me=True, pokes_in_window=4, seconds_since_bot_spoke=5),
        Outcome.DROP,
        Reason.POKE_FLOOD,
    ),
    (
        "poke flood beats private force",
        GateRequest(kind=StreamKind.PRIVATE, is_poke=True, poked_me=True, pokes_in_window=9),
        Outcome.DROP,
        Reason.POKE_FLOOD,
    ),
    (
        "private is forced",
        GateRequest(kind=StreamKind.PRIVATE),
        Outcome.FORCE,
        Reason.DIRECT_CONVERSATION,
    ),
    (
        "private is forced even asleep and capped",
        GateRequest(kind=StreamKind.PRIVATE, asleep=True, replies_in_window=99),
        Outcome.FORCE,
        Reason.DIRECT_CONVERSATION,
    ),
    ("@ in a group is forced", replace(GROUP, mentioned_me=True), Outcome.FORCE, Reason.MENTIONED),
    (
        "@ is forced before sleep",
        replace(GROUP, mentioned_me=True, asleep=True),
        Outcome.FORCE,
        Reason.MENTIONED,
    ),
    (
        "@ is forced before the cap",
        replace(GROUP, mentioned_me=True, replies_in_window=99),
        Outcome.FORCE,
        Reason.MENTIONED,
    ),
    (
        "asleep drops a name call",
        replace(GROUP, called_by_name=True, asleep=True),
        Outcome.DROP,
        Reason.ASLEEP,
    ),
    (
        "cap does not swallow a call by name",
        replace(GROUP, called_by_name=True, replies_in_window=CAPPED),
        Outcome.DELIBERATE,
        Reason.ATTENTION,
    ),
    (
        "cap does not swallow a reply to the bot",
        replace(GROUP, replied_to_me=True, replies_in_window=CAPPED),
        Outcome.DELIBERATE,
        Reason.ATTENTION,
    ),
    (
        "cap does not swallow a poke",
        replace(GROUP, is_poke=True, poked_me=True, pokes_in_window=1, replies_in_window=CAPPED),
        Outcome.DELIBERATE,
        Reason.ATTENTION,
    ),
    (
        "cap stops unsolicited participation",
        replace(GROUP, seconds_since_bot_spoke=10, replies_in_window=CAPPED),
        Outcome.DROP,
        Reason.FREQUENCY_CAP,
    ),
    (
        "below the cap the natural window deliberates",
        replace(GROUP, seconds_since_bot_spoke=10, replies_in_window=CAPPED - 1),
        Outcome.DELIBERATE,
        Reason.ATTENTION,
    ),
    (
        "natural window closes after 90 s",
        replace(GROUP, seconds_since_bot_spoke=91),
        Outcome.DROP,
        Reason.ATTENTION_FILTERED,
    ),
    (
        "a deliberate silence closes the natural window",
        replace(GROUP, seconds_since_bot_spoke=10, follow_up_declined=True),
        Outcome.DROP,
        Reason.ATTENTION_FILTERED,
    ),
    (
        "follow-up after an @ deliberates",
        replace(GROUP, in_follow_up_window=True),
        Outcome.DELIBERATE,
        Reason.ATTENTION,
    ),
    (
        "ongoing exchange deliberates",
        replace(GROUP, ongoing_exchange=True),
        Outcome.DELIBERATE,
        Reason.ATTENTION,
    ),
    (
        "public question deliberates",
        replace(GROUP, public_question=True),
        Outcome.DELIBERATE,
        Reason.ATTENTION,
    ),
    (
        "hot conversation is off by default",
        replace(GROUP, hot_conversation=True),
        Outcome.DROP,
        Reason.ATTENTION_FILTERED,
    ),
    ("nothing is filtered", GROUP, Outcome.DROP, Reason.ATTENTION_FILTERED),
    (
        "a poke between members raises no signal, even the name",
        replace(GROUP, is_poke=True, called_by_name=True, pokes_in_window=1),
        Outcome.DROP,
        Reason.ATTENTION_FILTERED,
    ),
]


@pytest.mark.parametrize(("name", "req", "outcome", "reason"), CASES, ids=[c[0] for c in CASES])
def test_rule(name: str, req: GateRequest, outcome: Outcome, reason: Reason) -> None:
    decided = decide_disposition(req, POLICY)
    assert (decided.outcome, decided.reason) == (outcome, reason)


def test_poke_text_never_counts_as_the_name() -> None:
    # A poke AT the bot (so not the members-poking-each-other early return) whose facts
    # claim the name: only the poke is a signal.
    poke = replace(GROUP, is_poke=True, poked_me=True, called_by_name=True, pokes_in_window=1)
    decided = decide_disposition(poke, POLICY)
    assert (decided.outcome, decided.reason) == (Outcome.DELIBERATE, Reason.ATTENTION)
    assert decided.signals == {Signal.POKED_ME}


def test_signals_are_reported_even_when_dropped() -> None:
    decided = decide_disposition(
        replace(GROUP, asleep=True, called_by_name=True, public_question=True), POLICY
    )
    assert decided.signals == {Signal.CALLED_BY_NAME, Signal.PUBLIC_QUESTION}


@pytest.mark.parametrize(
    "req",
    [
        replace(GROUP, mentioned_me=True),  # even an @, which is otherwise forced
        GateRequest(kind=StreamKind.PRIVATE),  # even a private chat
        replace(GROUP, poked_me=True, pokes_in_window=1),
        replace(GROUP, called_by_name=True, ambient=AmbientChance(roll=0.0)),
    ],
)
def test_model_chat_off_drops_everything_but_the_bots_own(req: GateRequest) -> None:
    off = POLICY.with_overrides({"model_chat": False})
    decided = decide_disposition(req, off)
    assert (decided.outcome, decided.reason) == (Outcome.DROP, Reason.CHAT_OFF)
    own = decide_disposition(replace(req, is_self_message=True), off)
    assert own.reason is Reason.SELF_MESSAGE  # the bot's own message keeps its own reason
    assert decide_disposition(req, POLICY).reason is not Reason.CHAT_OFF


def test_must_reply_off_lets_an_at_deliberate_and_sleep() -> None:
    relaxed = POLICY.with_overrides({"must_reply_on_mention": False})
    assert decide_disposition(replace(GROUP, mentioned_me=True), relaxed).outcome is (
        Outcome.DELIBERATE
    )
    asleep = decide_disposition(replace(GROUP, mentioned_me=True, asleep=True), relaxed)
    assert asleep.reason is Reason.ASLEEP


@pytest.mark.parametrize(
    ("chance", "wins"),
    [
        (AmbientChance(roll=0.01), True),
        (AmbientChance(roll=0.5), False),
        (AmbientChance(roll=0.01, seconds_since_last=60), False),  # cooldown
        (AmbientChance(roll=0.01, seconds_since_last=1000), True),
        (AmbientChance(roll=0.01, in_last_hour=2), False),  # hourly budget spent
    ],
)
def test_ambient_lottery(chance: AmbientChance, wins: bool) -> None:
    policy = GatePolicy(ambient_probability=0.05)
    decided = decide_disposition(replace(GROUP, ambient=chance), policy)
    assert (decided.reason is Reason.AMBIENT) is wins


def test_ambient_respects_sleep_and_cap() -> None:
    policy = GatePolicy(ambient_probability=1.0)
    lucky = AmbientChance(roll=0.0)
    assert decide_disposition(replace(GROUP, ambient=lucky, asleep=True), policy).reason is (
        Reason.ASLEEP
    )
    capped = replace(GROUP, ambient=lucky, replies_in_window=CAPPED)
    assert decide_disposition(capped, policy).reason is Reason.FREQUENCY_CAP


def test_lottery_roll_is_replayable_and_uniformish() -> None:
    assert lottery_roll("s", 1, 2) == lottery_roll("s", 1, 2)
    rolls = [lottery_roll("s", 1, i) for i in range(2000)]
    assert all(0 <= r < 1 for r in rolls)
    assert 0.4 < sum(r < 0.5 for r in rolls) / len(rolls) < 0.6


@pytest.mark.parametrize(
    ("disposition", "opens", "trigger", "size"),
    [
        (Disposition(Outcome.FORCE, Reason.DIRECT_CONVERSATION), False, SpeakTrigger.TO_ME, 8),
        (
            Disposition(Outcome.FORCE, Reason.MENTIONED, frozenset({Signal.MENTIONED})),
            False,
            SpeakTrigger.TO_ME,
            8,
        ),
        (
            Disposition(Outcome.DELIBERATE, Reason.ATTENTION, frozenset({Signal.FOLLOW_UP})),
            False,
            SpeakTrigger.FOLLOWUP,
            8,
        ),
        (
            Disposition(Outcome.DELIBERATE, Reason.ATTENTION, frozenset({Signal.CALLED_BY_NAME})),
            True,
            SpeakTrigger.ALIAS,
            8,
        ),
        (
            Disposition(Outcome.DELIBERATE, Reason.ATTENTION, frozenset({Signal.CALLED_BY_NAME})),
            False,
            SpeakTrigger.MENTION,
            8,
        ),
        (Disposition(Outcome.DELIBERATE, Reason.AMBIENT), False, SpeakTrigger.AMBIENT, 4),
        (
            Disposition(Outcome.DELIBERATE, Reason.ATTENTION, frozenset({Signal.NATURAL_WINDOW})),
            False,
            SpeakTrigger.AMBIENT,
            4,
        ),
    ],
)
def test_speak_trigger(
    disposition: Disposition, opens: bool, trigger: SpeakTrigger, size: int
) -> None:
    assert classify_speak_trigger(disposition, opens) is trigger
    assert timeline_size(trigger) == size


def test_quiet_hours_in_the_groups_time_zone() -> None:
    policy = GatePolicy(quiet_hours=("23:30-07:00",), timezone="Asia/Shanghai")
    assert is_quiet_time(datetime(2026, 1, 1, 16, 0, tzinfo=UTC), policy)  # 00:00 local
    assert not is_quiet_time(datetime(2026, 1, 1, 0, 0, tzinfo=UTC), policy)  # 08:00 local
    assert is_quiet_time(datetime(2026, 1, 1, 15, 30, tzinfo=UTC), policy)  # 23:30 local
    assert not is_quiet_time(datetime(2026, 1, 1, 23, 0, tzinfo=UTC), policy)  # 07:00 local


def test_group_overrides_apply_and_bad_ones_fall_back() -> None:
    merged, problem = effective_policy(POLICY, {"max_replies_in_window": 2})
    assert merged.max_replies_in_window == 2 and problem is None
    kept, problem = effective_policy(POLICY, {"quiet_hours": ["25:00-01:00"]})
    assert kept == POLICY and problem is not None
    kept, problem = effective_policy(POLICY, {"no_such_knob": 1})
    assert kept == POLICY and problem is not None


@pytest.mark.parametrize(
    ("text", "names", "named", "opens"),
    [
        ("牛牛在吗", ["牛牛"], True, True),
        ("，牛牛 帮我看看", ["牛牛"], True, True),
        ("我觉得牛牛说得对", ["牛牛"], True, False),
        ("PALLAS hi", ["pallas"], True, True),
        ("大家好", ["牛牛"], False, False),
    ],
)
def test_names(text: str, names: list[str], named: bool, opens: bool) -> None:
    assert names_in(text, names) is named
    assert opens_with_name(text, names) is opens


@pytest.mark.parametrize(
    ("text", "others", "question"),
    [
        ("有人知道这个怎么弄吗", False, True),
        ("这个插件到底怎么配置？", False, True),
        ("@张三 你吃了吗？", True, False),
        ("好？", False, False),
        ("今天天气不错", False, False),
    ],
)
def test_public_question(text: str, others: bool, question: bool) -> None:
    assert looks_like_public_question(text, others) is question


# Boundaries are the spec: a cooldown of N seconds lets the lottery run again at exactly N,
# the budget is spent at exactly its count, and a roll equal to the probability loses.
LOTTERY = GatePolicy(ambient_probability=0.05, ambient_cooldown_s=900, ambient_hourly_budget=2)


@pytest.mark.parametrize(
    ("policy", "chance", "wins"),
    [
        (LOTTERY, AmbientChance(roll=0.0), True),
        (LOTTERY, AmbientChance(roll=0.049), True),
        (LOTTERY, AmbientChance(roll=0.05), False),
        (LOTTERY, AmbientChance(roll=0.01, seconds_since_last=900), True),
        (LOTTERY, AmbientChance(roll=0.01, seconds_since_last=899.5), False),
        (LOTTERY, AmbientChance(roll=0.01, seconds_since_last=0), False),
        (LOTTERY, AmbientChance(roll=0.01, in_last_hour=1), True),
        (LOTTERY, AmbientChance(roll=0.01, in_last_hour=2), False),
        (LOTTERY, AmbientChance(roll=0.01, in_last_hour=3), False),
        (GatePolicy(ambient_probability=0.0), AmbientChance(roll=0.0), False),
        (GatePolicy(ambient_probability=1.0), AmbientChance(roll=0.999), True),
        (
            GatePolicy(ambient_probability=1.0, ambient_hourly_budget=0),
            AmbientChance(roll=0.0),
            False,
        ),
        (
            GatePolicy(ambient_probability=1.0, ambient_cooldown_s=0),
            AmbientChance(roll=0.0, seconds_since_last=0),
            True,
        ),
    ],
    ids=[
        "lowest roll wins",
        "roll just under the probability wins",
        "roll equal to the probability loses",
        "cooldown over at exactly its length",
        "just inside the cooldown",
        "right after an ambient turn",
        "one turn left in the hour's budget",
        "hour's budget spent at exactly its count",
        "over the hour's budget",
        "probability zero never wins",
        "probability one always wins",
        "a zero budget never wins",
        "no cooldown",
    ],
)
def test_ambient_lottery_boundaries(policy: GatePolicy, chance: AmbientChance, wins: bool) -> None:
    decided = decide_disposition(replace(GROUP, ambient=chance), policy)
    won = (Outcome.DELIBERATE, Reason.AMBIENT)
    assert ((decided.outcome, decided.reason) == won) is wins
    assert decided.passes is wins
    # Nobody called: whatever the lottery says, the turn reports no signal and no direct call.
    assert decided.signals == frozenset() and not decided.is_direct_call


def test_the_lottery_never_joins_a_poke_at_the_bot_that_floods() -> None:
    flood = replace(GROUP, is_poke=True, poked_me=True, pokes_in_window=4)
    decided = decide_disposition(flood, GatePolicy(ambient_probability=1.0))
    assert decided == Disposition(Outcome.DROP, Reason.POKE_FLOOD)


@pytest.mark.parametrize(
    ("req", "policy", "outcome", "reason", "signals"),
    [
        (
            replace(GROUP, pokes_in_window=9, seconds_since_bot_spoke=10),
            POLICY,
            Outcome.DELIBERATE,
            Reason.ATTENTION,
            {Signal.NATURAL_WINDOW},
        ),
        (
            replace(GROUP, is_poke=True, poked_me=True, pokes_in_window=0),
            POLICY.with_overrides({"poke_limit": 0}),
            Outcome.DELIBERATE,
            Reason.ATTENTION,
            {Signal.POKED_ME},
        ),
        (
            replace(GROUP, is_poke=True, poked_me=True, pokes_in_window=1),
            POLICY.with_overrides({"poke_limit": 0}),
            Outcome.DROP,
            Reason.POKE_FLOOD,
            set(),
        ),
        (
            replace(GROUP, hot_conversation=True),
            POLICY.with_overrides({"join_hot_conversations": True}),
            Outcome.DELIBERATE,
            Reason.ATTENTION,
            {Signal.HOT_CONVERSATION},
        ),
        (
            replace(GROUP, public_question=True),
            POLICY.with_overrides({"answer_public_questions": False}),
            Outcome.DROP,
            Reason.ATTENTION_FILTERED,
            set(),
        ),
        (
            replace(GROUP, replied_to_me=True, called_by_name=True, mentioned_me=True),
            POLICY,
            Outcome.FORCE,
            Reason.MENTIONED,
            {Signal.MENTIONED, Signal.CALLED_BY_NAME, Signal.REPLIED_TO_ME},
        ),
        (
            replace(GROUP, seconds_since_bot_spoke=0),
            POLICY.with_overrides({"natural_window_s": 0}),
            Outcome.DELIBERATE,
            Reason.ATTENTION,
            {Signal.NATURAL_WINDOW},
        ),
        (
            replace(GROUP, ongoing_exchange=True),
            POLICY.with_overrides({"max_replies_in_window": 0}),
            Outcome.DROP,
            Reason.FREQUENCY_CAP,
            {Signal.ONGOING_EXCHANGE},
        ),
        (
            GateRequest(kind=StreamKind.PRIVATE, called_by_name=True),
            POLICY,
            Outcome.FORCE,
            Reason.DIRECT_CONVERSATION,
            {Signal.CALLED_BY_NAME},
        ),
    ],
    ids=[
        "a message that is not a poke never floods",
        "a zero poke limit still lets a first poke through",
        "a zero poke limit floods at the first counted poke",
        "hot conversations when the group joins them",
        "public questions when the group ignores them",
        "every direct signal is reported with a forced @",
        "a zero natural window still includes its instant",
        "a zero cap silences even an ongoing exchange",
        "a private turn reports its signals",
    ],
)
def test_rule_and_signals(
    req: GateRequest, policy: GatePolicy, outcome: Outcome, reason: Reason, signals: set[Signal]
) -> None:
    assert decide_disposition(req, policy) == Disposition(outcome, reason, frozenset(signals))


@pytest.mark.parametrize(
    ("disposition", "passes", "direct"),
    [
        (Disposition(Outcome.DROP, Reason.ASLEEP, frozenset({Signal.MENTIONED})), False, True),
        (Disposition(Outcome.DROP, Reason.ATTENTION_FILTERED), False, False),
        (Disposition(Outcome.FORCE, Reason.DIRECT_CONVERSATION), True, True),
        (Disposition(Outcome.DELIBERATE, Reason.AMBIENT), True, False),
        (
            Disposition(Outcome.DELIBERATE, Reason.ATTENTION, frozenset({Signal.NATURAL_WINDOW})),
            True,
            False,
        ),
        *[
            (Disposition(Outcome.DELIBERATE, Reason.ATTENTION, frozenset({signal})), True, True)
            for signal in (
                Signal.MENTIONED,
                Signal.CALLED_BY_NAME,
                Signal.REPLIED_TO_ME,
                Signal.POKED_ME,
            )
        ],
    ],
    ids=[
        "dropped but called",
        "dropped, nobody called",
        "private",
        "ambient",
        "natural window is not a call",
        "@",
        "name",
        "reply",
        "poke",
    ],
)
def test_a_disposition_says_whether_it_passes_and_whether_it_was_a_call(
    disposition: Disposition, passes: bool, direct: bool
) -> None:
    assert (disposition.passes, disposition.is_direct_call) == (passes, direct)
