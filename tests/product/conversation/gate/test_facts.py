"""The per-message attention facts: read once at arrival, stored, merged per batch (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pallas.core.inbound import InboundMessage, StreamKind
from pallas.product.conversation.gate.activity import Sighting, StreamActivity
from pallas.product.conversation.gate.facts import (
    Asker,
    MessageFacts,
    count_pokes,
    gate_request,
    merge_facts,
    read_message,
)
from pallas.product.conversation.gate.policy import GatePolicy
from tests.support.inbound import BOT_ID, message

NAMES = ("牛牛", "pallas")
OTHER = "43"


@pytest.mark.parametrize(
    ("msg", "replied", "facts"),
    [
        (message("今天天气不错"), False, MessageFacts()),
        (
            message("牛牛 在吗", mentions=(BOT_ID,)),
            False,
            MessageFacts(mentioned_me=True, called_by_name=True, opens_with_name=True),
        ),
        (message("在吗", mentions=(BOT_ID,)), False, MessageFacts(mentioned_me=True)),
        (
            message("我觉得牛牛说得对"),
            False,
            MessageFacts(called_by_name=True),
        ),
        (
            message("，PALLAS 帮我看看"),
            False,
            MessageFacts(called_by_name=True, opens_with_name=True),
        ),
        (message("说得对"), True, MessageFacts(replied_to_me=True)),
        (
            message("有人知道这个怎么弄吗"),
            False,
            MessageFacts(public_question=True),
        ),
        (
            message("有人知道这个怎么弄吗", mentions=(BOT_ID,)),
            False,
            MessageFacts(mentioned_me=True, public_question=True),
        ),
        (message("有人知道这个怎么弄吗", mentions=(OTHER,)), False, MessageFacts()),
        (
            message("有人知道这个怎么弄吗", mentions=(BOT_ID, OTHER)),
            False,
            MessageFacts(mentioned_me=True),
        ),
        (
            message("牛牛 有人知道吗", is_poke=True, mentions=(BOT_ID,)),
            False,
            MessageFacts(is_poke=True, poked_me=True),
        ),
        (
            message("牛牛 有人知道吗", is_poke=True, mentions=(OTHER,)),
            False,
            MessageFacts(is_poke=True),
        ),
    ],
    ids=[
        "plain talk says nothing",
        "an @ that also names the bot",
        "a bare @",
        "the name inside a sentence",
        "the name opening the message, any case",
        "a reply to the bot",
        "a question to the room",
        "a question with an @ of the bot",
        "a question to another member is not public",
        "an @ of the bot and another member is not public",
        "a poke at the bot: its text never names or asks",
        "a poke between members",
    ],
)
def test_read_message(msg: InboundMessage, replied: bool, facts: MessageFacts) -> None:
    assert read_message(msg, NAMES, replied) == facts


NOW = datetime(2026, 1, 1, 4, 0, tzinfo=UTC)


def _poke(message_id: int, age_s: float, *, at_bot: bool = True) -> Sighting:
    at = NOW - timedelta(seconds=age_s)
    return Sighting(message_id, f"p{message_id}", 1, at, poked_me=at_bot)


@pytest.mark.parametrize(
    ("sightings", "count"),
    [
        ([], 0),
        ([_poke(1, 0)], 1),
        ([_poke(1, 300), _poke(2, 10), _poke(3, 0)], 3),
        ([_poke(1, 300.5), _poke(2, 10), _poke(3, 0)], 2),
        ([_poke(1, 10, at_bot=False), _poke(2, 0)], 1),
        ([_poke(1, 900), _poke(2, 400), _poke(3, 0)], 1),
    ],
    ids=[
        "none",
        "this poke counts",
        "a poke at the window edge counts",
        "a poke just past the window does not",
        "pokes between members do not count",
        "older pokes further back do not count either",
    ],
)
def test_count_pokes_in_the_window(sightings: list[Sighting], count: int) -> None:
    policy = GatePolicy(poke_window_s=300)
    assert count_pokes(StreamActivity(sightings), NOW, policy) == count


@pytest.mark.parametrize(
    ("facts", "merged"),
    [
        ([], MessageFacts(is_poke=True)),
        ([MessageFacts(is_poke=True, pokes_in_window=2)], MessageFacts(True, pokes_in_window=2)),
        (
            [MessageFacts(is_poke=True, poked_me=True, pokes_in_window=2), MessageFacts()],
            MessageFacts(poked_me=True, pokes_in_window=2),
        ),
        (
            [
                MessageFacts(is_poke=True, poked_me=True, pokes_in_window=3),
                MessageFacts(is_poke=True, poked_me=True, pokes_in_window=1),
            ],
            MessageFacts(is_poke=True, poked_me=True, pokes_in_window=3),
        ),
        (
            [
                MessageFacts(mentioned_me=True, opens_with_name=True),
                MessageFacts(called_by_name=True),
                MessageFacts(replied_to_me=True),
                MessageFacts(public_question=True),
            ],
            MessageFacts(
                mentioned_me=True,
                called_by_name=True,
                opens_with_name=True,
                replied_to_me=True,
                public_question=True,
            ),
        ),
        ([MessageFacts(), MessageFacts()], MessageFacts()),
    ],
    ids=[
        "an empty batch",
        "one poke",
        "a batch with talk is not a poke",
        "pokes keep the highest count, never a sum",
        "attention is OR-ed across the batch",
        "plain talk stays plain",
    ],
)
def test_merge_facts(facts: list[MessageFacts], merged: MessageFacts) -> None:
    assert merge_facts(iter(facts)) == merged


def test_facts_round_trip_through_json() -> None:
    facts = MessageFacts(
        is_poke=True,
        mentioned_me=False,
        called_by_name=True,
        opens_with_name=True,
        replied_to_me=False,
        poked_me=True,
        public_question=False,
        pokes_in_window=4,
    )
    stored = facts.to_json()
    assert stored == {
        "is_poke": True,
        "mentioned_me": False,
        "called_by_name": True,
        "opens_with_name": True,
        "replied_to_me": False,
        "poked_me": True,
        "public_question": False,
        "pokes_in_window": 4,
    }
    assert MessageFacts.from_json(stored) == facts


def test_facts_stored_by_another_version_still_load() -> None:
    # Rows written before or after a field was added: missing keys default, unknown ones drop.
    assert MessageFacts.from_json({"mentioned_me": True, "retired_flag": 1}) == MessageFacts(
        mentioned_me=True
    )
    assert MessageFacts.from_json({}) == MessageFacts()


def _line(message_id: int, age_s: float, *, from_bot: bool = False) -> Sighting:
    at = NOW - timedelta(seconds=age_s)
    return Sighting(message_id, f"m{message_id}", 0 if from_bot else 2, at, from_bot=from_bot)


@pytest.mark.parametrize(
    ("natural_window_s", "bot_age_s", "since"),
    [
        (90, 30, 30.0),
        (90, 599, 599.0),  # within the frequency cap's window: still seen
        (90, 1_000, None),  # older than every window: decides nothing, not looked for
        (1_800, 1_000, 1_000.0),  # a natural window that long is looked through
    ],
)
def test_the_bots_last_line_is_looked_for_only_as_far_as_a_window_reaches(
    natural_window_s: float, bot_age_s: float, since: float | None
) -> None:
    chatter = [_line(i, bot_age_s - i) for i in range(1, 40)]
    activity = StreamActivity([_line(1_000, bot_age_s, from_bot=True), *chatter])
    policy = GatePolicy(natural_window_s=natural_window_s, reply_window_s=600)
    asker = Asker(StreamKind.GROUP, 2, 39, 0.5)
    request = gate_request(asker, MessageFacts(), activity, policy, NOW)
    assert request.seconds_since_bot_spoke == since
